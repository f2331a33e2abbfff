import { InvalidOptionError } from '../../errors';
import type { DialectName } from './dialect';

/** The SDK's tables (outbox_event_archive only with rocketMqTxArchiveMigrations). */
export type SdkTable =
  'tx_record' | 'outbox_event' | 'consumed_event' | 'aggregate_cursor' | 'outbox_event_archive';

/**
 * A table privilege. OWNER (PostgreSQL only) is not a grantable privilege: the migrations role
 * must own the tables (it creates them, so it does), as only an owner may index, alter or drop one.
 */
export type TablePrivilege =
  'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE' | 'CREATE' | 'INDEX' | 'DROP' | 'REFERENCES' | 'OWNER';

/**
 * Who connects to the database, one MariaDB/MySQL user each:
 * - `producer`: TransactionalProducer (transact, its check-back fence, commit confirmations);
 * - `consumer`: IdempotentConsumer (dedupe row, aggregate cursor);
 * - `relay`: OutboxRelay and `rocketmq-tx relay` (claims, SENT/DEAD, discard reconciliation, replayDead);
 * - `status`: collectStatus and `rocketmq-tx status`;
 * - `deadLetter`: `rocketmq-tx dead-letter list|replay`;
 * - `retention`: Retention.purge/archive/plan and `rocketmq-tx archive [--purge]`;
 * - `reconcile`: FactReconciler and `rocketmq-tx reconcile` (dry run and --republish);
 * - `migrations`: runs rocketMqTxMigrations and rocketMqTxArchiveMigrations (the deploy user).
 */
export type GrantComponent =
  'producer' | 'consumer' | 'relay' | 'status' | 'deadLetter' | 'retention' | 'reconcile' | 'migrations';

type TableGrants = Partial<Record<SdkTable, readonly TablePrivilege[]>>;

/**
 * The table privileges each component needs, found by running each one under a user with only
 * these (test/integration/least-privilege.test.ts). MariaDB and MySQL check SELECT on every column
 * a WHERE clause or an ON DUPLICATE KEY UPDATE reads, so every writer also needs SELECT.
 * The user's own business tables (the producer's `work`, the consumer's handlers, the
 * reconciler's fact query) are not listed.
 */
export const RUNTIME_GRANTS: Readonly<Record<Exclude<GrantComponent, 'migrations'>, TableGrants>> = {
  // transact: INSERT tx_record then outbox_event; fence: INSERT tombstone, fresh SELECT; confirmations: UPDATE.
  producer: {
    tx_record: ['SELECT', 'INSERT', 'UPDATE'],
    outbox_event: ['SELECT', 'INSERT', 'UPDATE'],
  },
  // INSERT consumed_event (+ UPDATE outcome); upsert, SELECT ... FOR UPDATE and UPDATE the cursor.
  consumer: {
    consumed_event: ['SELECT', 'INSERT', 'UPDATE'],
    aggregate_cursor: ['SELECT', 'INSERT', 'UPDATE'],
  },
  // Claims (SELECT ... FOR UPDATE SKIP LOCKED + UPDATE), marks, replayDead; promotion reads tx_record.
  relay: {
    outbox_event: ['SELECT', 'UPDATE'],
    tx_record: ['SELECT'],
  },
  status: {
    tx_record: ['SELECT'],
    outbox_event: ['SELECT'],
    consumed_event: ['SELECT'],
  },
  // list: SELECT; replay: UPDATE status = 'NEW'.
  deadLetter: {
    outbox_event: ['SELECT', 'UPDATE'],
  },
  // Bounded DELETEs; archive() also copies into the archive (INSERT ... ON DUPLICATE KEY UPDATE).
  retention: {
    outbox_event: ['SELECT', 'DELETE'],
    tx_record: ['SELECT', 'DELETE'],
    consumed_event: ['SELECT', 'DELETE'],
    outbox_event_archive: ['SELECT', 'INSERT', 'UPDATE'],
  },
  // Lookups (live and archived); --republish inserts NEW outbox rows and their COMMITTED tx_records.
  reconcile: {
    outbox_event: ['SELECT', 'INSERT', 'UPDATE'],
    outbox_event_archive: ['SELECT'],
    tx_record: ['INSERT'],
  },
};

/**
 * up: CREATE TABLE (indexes inline) and CREATE INDEX (tx_record). down (revert): TypeORM drops the
 * indexes, then the table, after looking the table up in information_schema.COLUMNS, which shows
 * a table only to a user with a column privilege on it: REFERENCES (reads no data). Without it a
 * revert silently skips the DROP. MariaDB/MySQL accept these grants before the table exists only
 * in a statement that includes CREATE.
 */
const MIGRATION_PRIVILEGES: readonly TablePrivilege[] = ['CREATE', 'INDEX', 'DROP', 'REFERENCES'];
const MIGRATION_GRANTS: TableGrants = {
  tx_record: MIGRATION_PRIVILEGES,
  outbox_event: MIGRATION_PRIVILEGES,
  consumed_event: MIGRATION_PRIVILEGES,
  aggregate_cursor: MIGRATION_PRIVILEGES,
  outbox_event_archive: MIGRATION_PRIVILEGES,
};

/**
 * Where PostgreSQL needs less: its statements skip a refused key with ON CONFLICT DO NOTHING (no
 * UPDATE, which MySQL's no-op ON DUPLICATE KEY UPDATE needs).
 */
const POSTGRES_RUNTIME_OVERRIDES: Partial<Record<GrantComponent, TableGrants>> = {
  retention: { outbox_event_archive: ['SELECT', 'INSERT'] },
  reconcile: { outbox_event: ['SELECT', 'INSERT'] },
};

/**
 * PostgreSQL: the tables are created by, and so owned by, the migrations role (USAGE and CREATE
 * on the schema); it keeps TypeORM's bookkeeping table the same way.
 */
const POSTGRES_MIGRATION_GRANTS: TableGrants = {
  tx_record: ['OWNER'],
  outbox_event: ['OWNER'],
  consumed_event: ['OWNER'],
  aggregate_cursor: ['OWNER'],
  outbox_event_archive: ['OWNER'],
};

/** Every component, the deploy user first (its grants come before the migrations, the others after). */
export const GRANT_COMPONENTS: readonly GrantComponent[] = [
  'migrations',
  'producer',
  'consumer',
  'relay',
  'status',
  'deadLetter',
  'retention',
  'reconcile',
];

export interface GrantOptions {
  /**
   * MySQL/MariaDB: the database that holds the SDK's tables. PostgreSQL: the schema that holds
   * them (e.g. `public`).
   */
  database: string;
  /**
   * MySQL/MariaDB: the account, e.g. `'orders_producer'@'10.0.%'` (quoted as MariaDB/MySQL print
   * it). PostgreSQL: the role name, e.g. `orders_producer` (a login role, or a group role granted
   * to the login roles).
   */
  user: string;
  /** The database the statements are for. Default 'mysql' (MySQL and MariaDB). */
  dialect?: DialectName;
  /** migrations only: TypeORM's migrationsTableName (TypeORM's default: `migrations`). */
  migrationsTableName?: string;
  /** false: leave out outbox_event_archive (you do not use rocketMqTxArchiveMigrations). Default true. */
  archive?: boolean;
}

const IDENTIFIER_RE = /^[A-Za-z0-9_$]{1,64}$/;
const ACCOUNT_RE = /^'[^'\\]{1,80}'@'[^'\\]{1,255}'$/;

/** Table → privileges of one component (a copy), without the archive when `archive` is false. */
export function tableGrants(
  component: GrantComponent,
  options: { migrationsTableName?: string; archive?: boolean; dialect?: DialectName } = {},
): Record<string, TablePrivilege[]> {
  if (!GRANT_COMPONENTS.includes(component)) {
    throw new InvalidOptionError('component', component, `one of ${GRANT_COMPONENTS.join(', ')}`);
  }
  if (options.archive !== undefined && typeof options.archive !== 'boolean') {
    throw new InvalidOptionError('archive', options.archive, 'true or false');
  }
  const dialect = requireDialect(options.dialect);
  const base: TableGrants =
    component !== 'migrations'
      ? {
          ...RUNTIME_GRANTS[component],
          ...(dialect === 'postgres' ? POSTGRES_RUNTIME_OVERRIDES[component] : {}),
        }
      : dialect === 'postgres'
        ? POSTGRES_MIGRATION_GRANTS
        : MIGRATION_GRANTS;
  const out: Record<string, TablePrivilege[]> = {};
  for (const [table, privileges] of Object.entries(base)) {
    if (table === 'outbox_event_archive' && options.archive === false) continue;
    out[table] = [...privileges];
  }
  if (component === 'migrations') {
    // TypeORM creates its bookkeeping table, reads it, records each run; revert deletes the row.
    out[options.migrationsTableName ?? 'migrations'] =
      dialect === 'postgres' ? ['OWNER'] : ['SELECT', 'INSERT', 'DELETE', 'CREATE'];
  }
  return out;
}

/** MySQL/MariaDB: `GRANT <privileges> ON \`database\`.\`table\` TO <account>`. */
export function mysqlTableGrant(
  privileges: readonly string[],
  database: string,
  table: string,
  account: string,
): string {
  return `GRANT ${privileges.join(', ')} ON \`${database}\`.\`${table}\` TO ${account}`;
}

/** PostgreSQL: `GRANT <privileges> ON TABLE <table> TO "<role>"` (`table` as written, qualified or not). */
export function postgresTableGrant(privileges: readonly string[], table: string, role: string): string {
  return `GRANT ${privileges.join(', ')} ON TABLE ${table} TO "${role}"`;
}

function requireDialect(dialect: unknown): DialectName {
  if (dialect === undefined || dialect === 'mysql' || dialect === 'postgres') return dialect ?? 'mysql';
  throw new InvalidOptionError('dialect', dialect, '"mysql" or "postgres"');
}

const PG_ROLE_RE = /^[a-z_][a-z0-9_$]{0,62}$/;

function pgGrants(component: GrantComponent, options: GrantOptions): string[] {
  const { database: schema, user } = options;
  if (typeof schema !== 'string' || !PG_ROLE_RE.test(schema)) {
    throw new InvalidOptionError(
      'database',
      schema,
      'a schema name of 1-63 lower-case letters, digits, "_" or "$"',
    );
  }
  if (typeof user !== 'string' || !PG_ROLE_RE.test(user)) {
    throw new InvalidOptionError('user', user, 'a role name of 1-63 lower-case letters, digits, "_" or "$"');
  }
  if (options.migrationsTableName !== undefined && !PG_ROLE_RE.test(options.migrationsTableName)) {
    throw new InvalidOptionError(
      'migrationsTableName',
      options.migrationsTableName,
      'a table name of 1-63 lower-case letters, digits, "_" or "$"',
    );
  }
  tableGrants(component, options);
  if (component === 'migrations') {
    // The migrations role creates the tables (and TypeORM's bookkeeping table), so it owns them.
    return [`GRANT USAGE, CREATE ON SCHEMA "${schema}" TO "${user}"`];
  }
  return [
    `GRANT USAGE ON SCHEMA "${schema}" TO "${user}"`,
    ...Object.entries(tableGrants(component, options)).map(([table, privileges]) =>
      postgresTableGrant(privileges, `"${schema}"."${table}"`, user),
    ),
  ];
}

/**
 * The GRANT statements (table level, nothing global) that let `user` run `component` on
 * `database`. Print them, or run them as an administrator. On PostgreSQL (`dialect: 'postgres'`)
 * `database` is the schema and `user` a role: USAGE on the schema and the table privileges; the
 * migrations role gets USAGE and CREATE on the schema and owns what it creates.
 *
 * @example
 * rocketMqTxGrants('consumer', { database: 'orders', user: "'orders_consumer'@'%'" });
 * // ["GRANT SELECT, INSERT, UPDATE ON `orders`.`consumed_event` TO 'orders_consumer'@'%'", ...]
 * rocketMqTxGrants('consumer', { dialect: 'postgres', database: 'public', user: 'orders_consumer' });
 * // ['GRANT USAGE ON SCHEMA "public" TO "orders_consumer"',
 * //  'GRANT SELECT, INSERT, UPDATE ON TABLE "public"."consumed_event" TO "orders_consumer"', ...]
 */
export function rocketMqTxGrants(component: GrantComponent, options: GrantOptions): string[] {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError(
      'options',
      options,
      'an object { database, user, dialect?, migrationsTableName?, archive? }',
    );
  }
  if (requireDialect(options.dialect) === 'postgres') return pgGrants(component, options);
  const { database, user, migrationsTableName } = options;
  if (typeof database !== 'string' || !IDENTIFIER_RE.test(database)) {
    throw new InvalidOptionError('database', database, 'a database name of 1-64 letters, digits, "_" or "$"');
  }
  if (typeof user !== 'string' || !ACCOUNT_RE.test(user)) {
    throw new InvalidOptionError('user', user, "an account such as 'name'@'host'");
  }
  if (migrationsTableName !== undefined && !IDENTIFIER_RE.test(migrationsTableName)) {
    throw new InvalidOptionError(
      'migrationsTableName',
      migrationsTableName,
      'a table name of 1-64 letters, digits, "_" or "$"',
    );
  }
  return Object.entries(tableGrants(component, options)).map(([table, privileges]) =>
    mysqlTableGrant(privileges, database, table, user),
  );
}
