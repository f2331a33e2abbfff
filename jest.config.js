/**
 * Projects: unit (no services), integration (real RocketMQ broker + MariaDB, files in parallel),
 * isolated (tests that stop or restart the shared broker: run alone, after the others) and
 * contract (the store layer against the database ROCKETMQ_TX_DB_URL names, no broker: run once
 * per supported database by scripts/test-all.js, in band).
 */
const common = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  // Local brokers' and databases' data directories: PostgreSQL's logical decoding keeps *.snap
  // files that jest would take for obsolete snapshots, and nothing there is code.
  modulePathIgnorePatterns: [
    '<rootDir>/\\.postgres-logical/',
    '<rootDir>/\\.mariadb-binlog/',
    '<rootDir>/\\.rocketmq[^/]*/',
  ],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
};
module.exports = {
  projects: [
    {
      ...common,
      displayName: 'unit',
      // samples/**/*.test.ts: the users' examples (rocketmq-tx/testing), no services needed.
      testMatch: ['<rootDir>/test/unit/**/*.test.ts', '<rootDir>/samples/**/*.test.ts'],
    },
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
    {
      ...common,
      displayName: 'contract',
      testMatch: ['<rootDir>/test/contract/**/*.test.ts'],
      setupFiles: ['<rootDir>/test/helpers/integration-setup.ts'],
    },
  ],
};
