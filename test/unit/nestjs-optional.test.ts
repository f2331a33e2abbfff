/**
 * @nestjs/* are optional peer dependencies: the root entry point must import without them, and
 * only rocketmq-tx/nestjs needs them.
 */
jest.mock('@nestjs/common', () => {
  throw new Error('@nestjs/common must not be loaded');
});
jest.mock('@nestjs/core', () => {
  throw new Error('@nestjs/core must not be loaded');
});

it('imports the root entry point without loading @nestjs/*', () => {
  jest.isolateModules(() => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const root = require('../../src') as typeof import('../../src');
    expect(typeof root.TransactionalProducer).toBe('function');
  });
});

it('loads @nestjs/* for rocketmq-tx/nestjs (so the check above can fail)', () => {
  jest.isolateModules(() => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    expect(() => require('../../src/nestjs')).toThrow('must not be loaded');
  });
});

it('maps the subpath rocketmq-tx/nestjs to the built module in package.json', () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const pkg = require('../../package.json') as {
    exports: Record<string, unknown>;
    peerDependenciesMeta: Record<string, { optional?: boolean }>;
  };
  expect(pkg.exports['./nestjs']).toEqual({
    types: './dist/nestjs/index.d.ts',
    default: './dist/nestjs/index.js',
  });
  expect(pkg.peerDependenciesMeta['@nestjs/common']).toEqual({ optional: true });
  expect(pkg.peerDependenciesMeta['@nestjs/core']).toEqual({ optional: true });
});
