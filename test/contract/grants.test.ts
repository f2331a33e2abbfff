import { randomBytes } from 'node:crypto';
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import {
  FactReconciler,
  Retention,
  StoreAccessDeniedError,
  collectStatus,
  createEnvelope,
  rocketMqTxArchiveMigrations,
  rocketMqTxGrants,
  rocketMqTxMigrations,
  runDoctor,
  type GrantComponent,
} from '../../src';
import { DB_URL } from '../helpers/env';
import { TEST_DATABASE, ensureSchema, openDataSource } from '../helpers/db';
import { runCli } from '../unit/fakes/cli';
import {
  DAY_MS,
  cleanUpOps,
  ensureArchiveTable,
  ownTopic,
  insertConsumed,
  insertOutbox,
  present,
  runTag,
  statusOf,
} from './opsSupport';

/**
 * The operational components (status, dead-letter, retention, reconcile, migrations) under a
 * database account that holds exactly rocketMqTxGrants(component) — MySQL/MariaDB users with
 * table grants, PostgreSQL roles with schema USAGE and table grants — and doctor's schema and
 * privilege checks as that account.
 */
const RUN = runTag();
const password = randomBytes(12).toString('hex');
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

interface Account {
  url: string;
  ds: DataSource;
}

describe(`least-privilege operations (${TEST_DATABASE})`, () => {
  let admin: DataSource;
  const created: Array<() => Promise<void>> = [];
  const opened: DataSource[] = [];
  let adminDatabase: string;
  let accounts = 0;

  beforeAll(async () => {
    admin = await openDataSource();
    await ensureSchema(admin);
    await ensureArchiveTable(admin);
    adminDatabase = decodeURIComponent(new URL(DB_URL).pathname.slice(1));
  });
  afterAll(async () => {
    for (const ds of opened) await ds.destroy().catch(() => undefined);
    for (const drop of created.reverse()) await drop().catch(() => undefined);
    if (admin) await cleanUpOps(admin);
    await admin?.destroy();
  });

  /** An account with exactly the component's grants on `database` (MySQL) / `schema` (PostgreSQL). */
  async function account(component: GrantComponent, where: { database?: string; schema?: string } = {}) {
    const name = `ct_${component.toLowerCase().slice(0, 8)}_${RUN}_${++accounts}`;
    const url = new URL(DB_URL);
    url.username = name;
    url.password = password;
    if (TEST_DATABASE === 'postgres') {
      const schema = where.schema ?? 'public';
      await admin.query(`CREATE ROLE "${name}" LOGIN PASSWORD '${password}'`);
      // The SDK's statements name tables unqualified: the schema is the role's search_path.
      if (where.schema) await admin.query(`ALTER ROLE "${name}" SET search_path = "${where.schema}"`);
      created.push(async () => {
        await admin.query(`DROP OWNED BY "${name}" CASCADE`);
        await admin.query(`DROP ROLE "${name}"`);
      });
      for (const g of rocketMqTxGrants(component, { dialect: 'postgres', database: schema, user: name })) {
        await admin.query(g);
      }
    } else {
      const database = where.database ?? adminDatabase;
      url.pathname = `/${database}`;
      for (const host of ['127.0.0.1', 'localhost']) {
        const user = `'${name}'@'${host}'`;
        await admin.query(`CREATE USER ${user} IDENTIFIED BY '${password}'`);
        created.push(async () => void (await admin.query(`DROP USER ${user}`)));
        for (const g of rocketMqTxGrants(component, {
          database,
          user,
          migrationsTableName: 'ct_migrations',
        })) {
          await admin.query(g);
        }
      }
    }
    const ds = new DataSource({
      type: TEST_DATABASE,
      url: url.toString(),
      poolSize: 4,
      logging: false,
      migrationsTableName: 'ct_migrations',
    } as ConstructorParameters<typeof DataSource>[0]);
    await ds.initialize();
    opened.push(ds);
    return { url: url.toString(), ds } satisfies Account;
  }

  it('status: collectStatus, the CLI status command, and doctor with a passing grants check', async () => {
    const { ds, url } = await account('status');
    const s = await collectStatus(ds);
    expect(s.outbox.total).toBeGreaterThanOrEqual(0);
    const cli = await runCli(['status', '--json'], { ROCKETMQ_TX_DB_URL: url });
    expect(cli.stderr).toBe('');
    expect(cli.code).toBe(0);
    expect(JSON.parse(cli.stdout).txRecords).toEqual(expect.objectContaining({ total: expect.any(Number) }));
    expect(cli.stdout + cli.stderr).not.toContain(password);
    const doctor = await runCli(['doctor', '--json', '--component', 'status'], { ROCKETMQ_TX_DB_URL: url });
    expect(doctor.stdout + doctor.stderr).not.toContain(password);
    const viaCli = JSON.parse(doctor.stdout) as { checks: Array<{ id: string; status: string }> };
    expect(viaCli.checks.filter((c) => c.id.startsWith('grants.')).map((c) => c.status)).toEqual([
      'pass',
      'pass',
      'pass',
    ]);

    const report = await runDoctor({ dataSource: ds, components: ['status'], logger: quiet });
    const grants = report.checks.filter((c) => c.id.startsWith('grants.'));
    expect(grants.map((c) => [c.id, c.status])).toEqual([
      ['grants.tx_record', 'pass'],
      ['grants.outbox_event', 'pass'],
      ['grants.consumed_event', 'pass'],
    ]);
    for (const id of ['schema.tx_record', 'schema.outbox_event', 'schema.consumed_event']) {
      expect(report.checks.find((c) => c.id === id)).toMatchObject({ status: 'pass' });
    }
    // Not this account's tables: not visible (a privilege is needed to see them), so not checked.
    expect(report.checks.find((c) => c.id === 'schema.aggregate_cursor')).toMatchObject({ status: 'skip' });
    const settings = report.checks.filter((c) => c.group === 'database settings');
    expect(settings.map((c) => c.status)).not.toContain('fail');
    expect(report.checks.find((c) => c.id === 'clock.skew')).toMatchObject({ status: 'pass' });
  });

  it('the CLI names an unusable database by its masked URL, never the password', async () => {
    const url = new URL(DB_URL);
    url.username = `ct_nobody_${RUN}`;
    url.password = 'Sup3rSecretPw';
    url.pathname = `/ct_missing_${RUN}`;
    const r = await runCli(['status'], { ROCKETMQ_TX_DB_URL: url.toString() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${url.protocol}//ct_nobody_${RUN}:***@`);
    expect(r.stderr).toMatch(/refused the login|does not exist/);
    expect(r.stdout + r.stderr).not.toContain('Sup3rSecretPw');
  });

  it('doctor names the missing privilege of an account that lacks one', async () => {
    const { ds } = await account('deadLetter');
    const report = await runDoctor({ dataSource: ds, components: ['retention'], logger: quiet });
    const outbox = report.checks.find((c) => c.id === 'grants.outbox_event')!;
    expect(outbox.status).toBe('fail');
    expect(outbox.value).toMatch(/lacks DELETE on outbox_event/);
    expect(report.checks.find((c) => c.id === 'grants.tx_record')).toMatchObject({ status: 'fail' });
  });

  it('dead-letter: list, a dry-run replay and a replay through the CLI', async () => {
    const topic = `ct_dl_${RUN}`;
    const dead = await insertOutbox(admin, { topic, status: 'DEAD', ageMs: 60_000, lastError: 'boom' });
    const { url } = await account('deadLetter');
    const list = await runCli(['dead-letter', 'list', '--topic', topic, '--json'], {
      ROCKETMQ_TX_DB_URL: url,
    });
    expect(list.code).toBe(0);
    const listed = JSON.parse(list.stdout);
    expect(listed.total).toBe(1);
    expect(listed.events[0]).toMatchObject({ eventId: dead, topic, lastError: 'boom', attempts: 0 });
    expect(listed.events[0].ageMs).toBeGreaterThanOrEqual(59_000);
    const dry = await runCli(['dead-letter', 'replay', '--all', '--topic', topic, '--dry-run', '--json'], {
      ROCKETMQ_TX_DB_URL: url,
    });
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, matched: 1, replayed: 0 });
    const missing = await runCli(
      // Another id (its last digit changed, never to itself: a fixed '0' matched 1 id in 16).
      [
        'dead-letter',
        'replay',
        '--event-id',
        `${dead.slice(0, -1)}${dead.endsWith('0') ? '1' : '0'}`,
        '--dry-run',
      ],
      {
        ROCKETMQ_TX_DB_URL: url,
      },
    );
    expect(missing.stdout).toMatch(/is not in outbox_event/);
    const replay = await runCli(['dead-letter', 'replay', '--event-id', dead, '--json'], {
      ROCKETMQ_TX_DB_URL: url,
    });
    expect(replay.code).toBe(0);
    expect(JSON.parse(replay.stdout)).toMatchObject({ dryRun: false, matched: 1, replayed: 1, notDead: [] });
    expect(await statusOf(admin, dead)).toBe('NEW');
  });

  it('retention: plan, purge and archive', async () => {
    const topic = `ct_rt_${RUN}`;
    const archived = await insertOutbox(admin, { topic, status: 'SENT', ageMs: 10 * DAY_MS });
    const consumed = await insertConsumed(admin, { group: `ct_rt_${RUN}`, ageMs: 10 * DAY_MS });
    const { ds, url } = await account('retention');
    const dry = await runCli(['archive', '--older-than', '1d', '--dry-run', '--json'], {
      ROCKETMQ_TX_DB_URL: url,
    });
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout).outboxEvents).toBeGreaterThanOrEqual(1);
    const retention = new Retention({ dataSource: ds, batchSize: 50 });
    expect((await retention.plan()).outboxEvents).toBeGreaterThanOrEqual(1);
    const moved = await retention.archive();
    expect(moved.outboxEvents).toBeGreaterThanOrEqual(1);
    expect(moved.consumedEvents).toBeGreaterThanOrEqual(1);
    expect(await present(admin, 'outbox_event_archive', 'event_id', [archived])).toEqual([archived]);
    expect(await present(admin, 'consumed_event', 'event_id', [consumed])).toEqual([]);
    const old = await insertOutbox(admin, { topic, status: 'SENT', ageMs: 10 * DAY_MS });
    expect((await retention.purge()).outboxEvents).toBeGreaterThanOrEqual(1);
    expect(await present(admin, 'outbox_event', 'event_id', [old])).toEqual([]);
  });

  it('reconcile: lookups (live and archive) and the republish write; a missing privilege is a StoreAccessDeniedError', async () => {
    const topic = ownTopic(`ct_rc_${RUN}`);
    const options = (aggregateId: string) => {
      const fact = {
        aggregateType: `CtLp${RUN}`,
        aggregateId,
        eventType: 'OrderPlaced',
        aggregateVersion: 1,
      };
      return {
        facts: async () => ({ facts: [fact], nextCursor: null }),
        buildEvent: () => ({
          topic,
          event: createEnvelope({ ...fact, eventVersion: 1, data: {} }),
        }),
        producerGroup: `ct_rc_${RUN}`,
        topics: [topic],
      };
    };
    const { ds } = await account('reconcile');
    const report = await new FactReconciler({ dataSource: ds, ...options('a1') }).run({ dryRun: false });
    expect(report).toMatchObject({ republished: 1, missingCount: 1 });
    const { ds: statusOnly } = await account('status');
    await expect(
      new FactReconciler({ dataSource: statusOnly, ...options('a2'), includeArchive: false }).run({
        dryRun: false,
      }),
    ).rejects.toBeInstanceOf(StoreAccessDeniedError);
  });

  it('migrations: the deploy account creates the schema (and the archive) and reverts it', async () => {
    const scratch = `ct_mig_${RUN}`;
    if (TEST_DATABASE === 'postgres') {
      await admin.query(`CREATE SCHEMA "${scratch}"`);
      created.unshift(async () => void (await admin.query(`DROP SCHEMA "${scratch}" CASCADE`)));
    } else {
      await admin.query(`CREATE DATABASE \`${scratch}\``);
      created.unshift(async () => void (await admin.query(`DROP DATABASE \`${scratch}\``)));
    }
    const where = TEST_DATABASE === 'postgres' ? { schema: scratch } : { database: scratch };
    const { ds } = await account('migrations', where);
    ds.setOptions({ migrations: [...rocketMqTxMigrations, ...rocketMqTxArchiveMigrations] });
    await ds.destroy();
    await ds.initialize();
    const ran = await ds.runMigrations({ transaction: 'none' });
    expect(ran.length).toBe(rocketMqTxMigrations.length + rocketMqTxArchiveMigrations.length);
    const report = await runDoctor({
      dataSource: ds,
      components: ['migrations'],
      migrationsTableName: 'ct_migrations',
      archive: true,
      logger: quiet,
    });
    const bad = report.checks.filter((c) => /^(schema|grants)\./.test(c.id) && c.status !== 'pass');
    expect(bad).toEqual([]);
    for (let i = 0; i < ran.length; i++) await ds.undoLastMigration({ transaction: 'none' });
    const left: Array<{ n: number | string }> = await admin.query(
      TEST_DATABASE === 'postgres'
        ? `SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = '${scratch}' AND table_name <> 'ct_migrations'`
        : `SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${scratch}' AND TABLE_NAME <> 'ct_migrations'`,
    );
    expect(Number(left[0]!.n)).toBe(0);
  });
});
