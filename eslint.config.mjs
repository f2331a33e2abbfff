import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Layer rules (issue 13): each directory of src/ may import only what its layer allows.
const brokerClient = {
  group: ['rocketmq-client-nodejs', 'rocketmq-client-nodejs/*'],
  message: 'Only src/broker/ may import the RocketMQ client.',
};
const components = (dirs, why) => ({
  group: dirs.map((d) => `**/${d}/*`).concat(dirs.map((d) => `**/${d}`)),
  message: why,
});
// Outside src/store/ typeorm is used for its types (DataSource, EntityManager, QueryRunner...) and
// to construct a DataSource: no repositories, query builders or other runtime helpers.
const typeormOutsideStore = {
  name: 'typeorm',
  allowTypeImports: true,
  allowImportNames: ['DataSource'],
  message: 'Outside src/store/ import typeorm types only (and DataSource to create one).',
};
const restrictedImports = (...patterns) => [
  'error',
  { paths: [typeormOutsideStore], patterns: [brokerClient, ...patterns] },
];

// SQL lives in src/store/ only (issue 13, item 2).
const noSqlOutsideStore = [
  {
    selector: 'CallExpression[callee.property.name=/^(query|createQueryBuilder|getRepository)$/]',
    message: 'SQL and repositories belong in src/store/ (a store port or the dialect), not here.',
  },
  {
    selector: 'TSClassImplements[expression.name=/Store$/]',
    message: 'Store ports are implemented under src/store/ only.',
  },
];

export default tseslint.config(
  {
    ignores: ['node_modules/', 'dist/', 'coverage/', 'temp/', '.rocketmq/', 'bench/results/', 'bench/java/'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-floating-promises': 'off',
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/broker/**', 'src/store/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrictedImports(),
      'no-restricted-syntax': ['error', ...noSqlOutsideStore],
    },
  },
  {
    files: ['src/store/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            brokerClient,
            components(
              ['producer', 'consumer', 'relay', 'checkback', 'observability', 'cli', 'doctor'],
              'src/store/ is the bottom layer: it may not import the components that use it.',
            ),
          ],
        },
      ],
    },
  },
  {
    files: ['src/relay/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrictedImports(
        components(
          ['producer'],
          'The relay may not import producer internals: share them from a neutral module.',
        ),
      ),
    },
  },
  {
    files: ['src/observability/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': restrictedImports({
        // consumer/outcome is the plain type of a consume outcome, not the consumer.
        group: ['**/producer/*', '**/consumer/*', '!**/consumer/outcome', '**/relay/*'],
        message: 'Observability may not import the components: they register through ObservableComponent.',
      }),
    },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: {
        require: 'readonly',
        module: 'writable',
        process: 'readonly',
        __dirname: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
      },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
