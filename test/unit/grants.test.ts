import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  GRANT_COMPONENTS,
  InvalidOptionError,
  StoreAccessDeniedError,
  StoreError,
  rocketMqTxGrants,
  tableGrants,
  type GrantComponent,
} from '../../src';
import { mysqlDialect } from '../../src/store/typeorm/dialect';
import { toStoreError } from '../../src/store/typeorm/storeError';

const SQL_FILE = join(__dirname, '..', '..', 'docs', 'grants.mysql.sql');
const account = (c: GrantComponent) => `'rmqtx_${c.replace(/[A-Z]/g, (m) => `_${m.toLowerCase()}`)}'@'%'`;
const driverError = (code: string, errno: number, sqlMessage: string) =>
  Object.assign(new Error(sqlMessage), { driverError: { code, errno, sqlMessage } });

describe('rocketMqTxGrants', () => {
  it('docs/grants.mysql.sql holds exactly the GRANT statements rocketMqTxGrants prints, per component', () => {
    const inFile = readFileSync(SQL_FILE, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('GRANT '));
    const expected = GRANT_COMPONENTS.flatMap((c) =>
      rocketMqTxGrants(c, { database: 'rocketmq_tx', user: account(c) }).map((g) => `${g};`),
    );
    expect(inFile).toEqual(expected);
  });

  it('docs/grants.postgres.sql holds exactly the GRANT statements rocketMqTxGrants prints for PostgreSQL', () => {
    const inFile = readFileSync(join(__dirname, '..', '..', 'docs', 'grants.postgres.sql'), 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('GRANT '));
    const role = (c: GrantComponent) => `rmqtx_${c.replace(/[A-Z]/g, (m) => `_${m.toLowerCase()}`)}`;
    const expected = GRANT_COMPONENTS.flatMap((c) =>
      rocketMqTxGrants(c, { dialect: 'postgres', database: 'public', user: role(c) }).map((g) => `${g};`),
    );
    expect(inFile).toEqual(expected);
  });

  it('grants table privileges only, never on *.* or db.*, and no writer lacks SELECT', () => {
    for (const c of GRANT_COMPONENTS) {
      for (const g of rocketMqTxGrants(c, { database: 'shop', user: "'u'@'%'" })) {
        expect(g).toMatch(/^GRANT [A-Z, ]+ ON `shop`\.`[a-z_]+` TO 'u'@'%'$/);
      }
      if (c === 'migrations') continue;
      for (const [table, privileges] of Object.entries(tableGrants(c))) {
        // A WHERE clause or ON DUPLICATE KEY UPDATE reads columns: the server checks SELECT on them.
        if (privileges.some((p) => p === 'UPDATE' || p === 'DELETE'))
          expect([table, privileges]).toEqual([table, expect.arrayContaining(['SELECT'])]);
      }
    }
  });

  it('the consumer is never granted the fence or the outbox, the status reader only SELECT', () => {
    expect(Object.keys(tableGrants('consumer')).sort()).toEqual(['aggregate_cursor', 'consumed_event']);
    for (const privileges of Object.values(tableGrants('status'))) expect(privileges).toEqual(['SELECT']);
    expect(tableGrants('retention', { archive: false })).not.toHaveProperty('outbox_event_archive');
    expect(tableGrants('migrations', { migrationsTableName: 'rocketmq_tx_migrations' })).toHaveProperty(
      'rocketmq_tx_migrations',
    );
  });

  it('PostgreSQL: USAGE on the schema and table privileges to a role; the migrations role gets CREATE on the schema and owns the tables', () => {
    const pg = (c: GrantComponent) =>
      rocketMqTxGrants(c, { dialect: 'postgres', database: 'public', user: 'orders_app' });
    expect(pg('consumer')).toEqual([
      'GRANT USAGE ON SCHEMA "public" TO "orders_app"',
      'GRANT SELECT, INSERT, UPDATE ON TABLE "public"."consumed_event" TO "orders_app"',
      'GRANT SELECT, INSERT, UPDATE ON TABLE "public"."aggregate_cursor" TO "orders_app"',
    ]);
    expect(pg('migrations')).toEqual(['GRANT USAGE, CREATE ON SCHEMA "public" TO "orders_app"']);
    for (const c of GRANT_COMPONENTS) {
      for (const g of pg(c))
        expect(g).toMatch(/^GRANT [A-Z, ]+ ON (SCHEMA "public"|TABLE "public"\."[a-z_]+") TO "orders_app"$/);
    }
    // ON CONFLICT DO NOTHING needs no UPDATE (MySQL's no-op ON DUPLICATE KEY UPDATE does).
    expect(tableGrants('reconcile', { dialect: 'postgres' }).outbox_event).toEqual(['SELECT', 'INSERT']);
    expect(tableGrants('retention', { dialect: 'postgres' }).outbox_event_archive).toEqual([
      'SELECT',
      'INSERT',
    ]);
    expect(tableGrants('migrations', { dialect: 'postgres' })).toMatchObject({
      tx_record: ['OWNER'],
      migrations: ['OWNER'],
    });
    expect(() =>
      rocketMqTxGrants('producer', { dialect: 'postgres', database: 'public', user: "'u'@'%'" }),
    ).toThrow(/option user/);
    expect(() => rocketMqTxGrants('producer', { dialect: 'postgres', database: 'a"b', user: 'u' })).toThrow(
      /option database/,
    );
    expect(() =>
      rocketMqTxGrants('producer', { dialect: 'oracle' as 'postgres', database: 'public', user: 'u' }),
    ).toThrow(/option dialect/);
  });

  it('validates its options, naming the bad one', () => {
    const ok = { database: 'shop', user: "'u'@'%'" };
    expect(() => rocketMqTxGrants('admin' as GrantComponent, ok)).toThrow(InvalidOptionError);
    expect(() => tableGrants('admin' as GrantComponent)).toThrow(/option component/);
    expect(() => rocketMqTxGrants('relay', { ...ok, archive: 'no' as unknown as boolean })).toThrow(
      /option archive/,
    );
    expect(() => rocketMqTxGrants('relay', null as unknown as typeof ok)).toThrow(/option options/);
    expect(() => rocketMqTxGrants('producer', { ...ok, database: 'shop`; DROP' })).toThrow(/option database/);
    expect(() => rocketMqTxGrants('producer', { ...ok, user: 'u' })).toThrow(/option user/);
    expect(() => rocketMqTxGrants('producer', { ...ok, user: "'u'@'%' WITH GRANT OPTION" })).toThrow(
      /option user/,
    );
    expect(() => rocketMqTxGrants('migrations', { ...ok, migrationsTableName: 'a b' })).toThrow(
      /option migrationsTableName/,
    );
  });
});

describe('privilege errors', () => {
  it.each([
    ["INSERT command denied to user 'a'@'127.0.0.1' for table `db`.`tx_record`", 'INSERT', 'tx_record'],
    ["DELETE command denied to user 'a'@'localhost' for table 'outbox_event'", 'DELETE', 'outbox_event'],
    ["SELECT command denied to user 'a'@'%' for table 'db.consumed_event'", 'SELECT', 'consumed_event'],
  ])('reads the privilege and the table from %s', (message, privilege, table) => {
    const err = driverError('ER_TABLEACCESS_DENIED_ERROR', 1142, message);
    expect(mysqlDialect.classify(err)).toBe('ACCESS_DENIED');
    expect(mysqlDialect.accessDenied(err)).toEqual({ privilege, table });
  });

  it('a column-level refusal names the column too', () => {
    const err = driverError(
      'ER_COLUMNACCESS_DENIED_ERROR',
      1143,
      "SELECT command denied to user 'a'@'127.0.0.1' for column 'confirmed_at' in table 'tx_record'",
    );
    expect(mysqlDialect.accessDenied(err)).toEqual({
      privilege: 'SELECT',
      table: 'tx_record',
      column: 'confirmed_at',
    });
    const typed = toStoreError('confirming', err);
    expect(typed).toBeInstanceOf(StoreAccessDeniedError);
    expect(typed.message).toBe(
      'confirming: the database user lacks SELECT on tx_record (column confirmed_at); grant it (rocketMqTxGrants() lists what each component needs)',
    );
  });

  it('toStoreError: a refusal is a StoreError with its own code, not retriable, keeping its cause', () => {
    const denied = driverError(
      'ER_TABLEACCESS_DENIED_ERROR',
      1142,
      "UPDATE command denied to user 'a'@'h' for table `db`.`outbox_event`",
    );
    const typed = toStoreError('claim', denied);
    expect(typed).toBeInstanceOf(StoreError);
    expect(typed).toBeInstanceOf(StoreAccessDeniedError);
    expect(typed).toMatchObject({
      code: 'STORE_ACCESS_DENIED',
      retriable: false,
      privilege: 'UPDATE',
      table: 'outbox_event',
      cause: denied,
    });
    const deadlock = driverError('ER_LOCK_DEADLOCK', 1213, 'Deadlock found when trying to get lock');
    const other = toStoreError('claim', deadlock);
    expect(other).not.toBeInstanceOf(StoreAccessDeniedError);
    expect(other).toMatchObject({ code: 'STORE_ERROR', retriable: true, cause: deadlock });
    expect(mysqlDialect.classify(driverError('ER_NO_SUCH_TABLE', 1146, "Table 'db.x' doesn't exist"))).toBe(
      'NO_SUCH_TABLE',
    );
  });
});
