/**
 * Projects: unit (no services), integration (real RocketMQ broker + MariaDB, files in parallel)
 * and isolated (tests that stop or restart the shared broker: run alone, after the others).
 */
const common = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
};
module.exports = {
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      testPathIgnorePatterns: ['\\.isolated\\.test\\.ts$'],
      setupFiles: ['<rootDir>/test/helpers/integration-setup.ts'],
      slowTestThreshold: 30,
    },
    {
      ...common,
      displayName: 'isolated',
      testMatch: ['<rootDir>/test/integration/**/*.isolated.test.ts'],
      setupFiles: ['<rootDir>/test/helpers/integration-setup.ts'],
      slowTestThreshold: 60,
    },
  ],
};
