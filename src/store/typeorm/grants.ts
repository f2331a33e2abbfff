import { InvalidOptionError } from '../../errors';

/** The SDK's tables (outbox_event_archive only with rocketMqTxArchiveMigrations). */
export type SdkTable =
  'tx_record' | 'outbox_event' | 'consumed_event' | 'aggregate_cursor' | 'outbox_event_archive';

export type TablePrivilege =
  'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE' | 'CREATE' | 'INDEX' | 'DROP' | 'REFERENCES';

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
  /** The database (schema) that holds the SDK's tables. */
  database: string;
  /** The account, e.g. `'orders_producer'@'10.0.%'` (quoted as MariaDB/MySQL print it). */
  user: string;
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
  options: { migrationsTableName?: string; archive?: boolean } = {},
): Record<string, TablePrivilege[]> {
  if (!GRANT_COMPONENTS.includes(component)) {
    throw new InvalidOptionError('component', component, `one of ${GRANT_COMPONENTS.join(', ')}`);
  }
  if (options.archive !== undefined && typeof options.archive !== 'boolean') {
    throw new InvalidOptionError('archive', options.archive, 'true or false');
  }
  const base: TableGrants = component === 'migrations' ? MIGRATION_GRANTS : RUNTIME_GRANTS[component];
  const out: Record<string, TablePrivilege[]> = {};
  for (const [table, privileges] of Object.entries(base)) {
    if (table === 'outbox_event_archive' && options.archive === false) continue;
    out[table] = [...privileges];
  }
  if (component === 'migrations') {
    // TypeORM creates its bookkeeping table, reads it, records each run; revert deletes the row.
    out[options.migrationsTableName ?? 'migrations'] = ['SELECT', 'INSERT', 'DELETE', 'CREATE'];
  }
  return out;
}

/**
 * The GRANT statements (table level, nothing global) that let `user` run `component` on
 * `database`. Print them, or run them as an administrator:
 *
 * @example
 * rocketMqTxGrants('consumer', { database: 'orders', user: "'orders_consumer'@'%'" });
 * // ["GRANT SELECT, INSERT, UPDATE ON `orders`.`consumed_event` TO 'orders_consumer'@'%'", ...]
 */
export function rocketMqTxGrants(component: GrantComponent, options: GrantOptions): string[] {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError(
      'options',
      options,
      'an object { database, user, migrationsTableName?, archive? }',
    );
  }
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
  return Object.entries(tableGrants(component, options)).map(
    ([table, privileges]) => `GRANT ${privileges.join(', ')} ON \`${database}\`.\`${table}\` TO ${user}`,
  );
}
