import { randomBytes } from 'node:crypto';
import 'reflect-metadata';
import { DataSource, type EntityManager } from 'typeorm';
import {
  FactReconciler,
  GRANT_COMPONENTS,
  IdempotentConsumer,
  StoreAccessDeniedError,
  StoreError,
  TransactionFencedError,
  TypeOrmOutboxStore,
  collectStatus,
  defineEvent,
  on,
  rocketMqTxArchiveMigrations,
  rocketMqTxGrants,
  rocketMqTxMigrations,
  uuidv7,
  type CheckBackOutcome,
  type Envelope,
  type GrantComponent,
  type OutboxRelay,
  type StatusReport,
  type TransactionalProducer,
} from '../../src';
import type { CommandContext } from '../../src/cli/args';
import { main } from '../../src/cli/main';
import { outboxRows, prepareEvents } from '../../src/outbox/events';
import { DB_URL, ENDPOINTS, waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';
import { makeRelay } from '../helpers/relay';

// Each component runs under a MariaDB user that has exactly rocketMqTxGrants(component), on a
// scratch database whose schema the deploy user created with table-level DDL grants only.
const TX_TOPIC = 'rmqtx_tx_20';
const NORMAL_TOPIC = 'rmqtx_normal_12';
const RUN = `${process.pid}`;
const SCRATCH = `rmqtx_scratch_grants_${RUN}`;
const TAG = `run_${RUN}_${Date.now().toString(36)}`;
const GROUP = `rmqtx_lp_${RUN}`;
const HOSTS = ['127.0.0.1', 'localhost'];
const MIGRATIONS_TABLE = 'rocketmq_tx_migrations';
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

const ItemAdded = defineEvent<{ sku: string }>({
  eventType: 'LpItemAdded',
  eventVersion: 1,
  aggregateType: 'LpCart',
});

const userOf = (c: GrantComponent) => `rmqtx_${c.toLowerCase().slice(0, 10)}_${RUN}`.slice(0, 32);
const password = randomBytes(12).toString('hex');

function urlFor(user: string): string {
  const url = new URL(DB_URL);
  url.username = user;
  url.password = password;
  url.pathname = `/${SCRATCH}`;
  return url.toString();
}

function dataSourceFor(component: GrantComponent, extra: Partial<{ migrations: unknown[] }> = {}) {
  return new DataSource({
    type: 'mysql',
    url: urlFor(userOf(component)),
    poolSize: 6,
    logging: false,
    migrationsTableName: MIGRATIONS_TABLE,
    ...(extra as object),
  });
}

/** The CLI in-process (the same code as the bin), under `component`'s user. */
async function cli(component: GrantComponent, argv: string[]) {
  let stdout = '';
  let stderr = '';
  const ctx: CommandContext = {
    io: {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
      env: { ROCKETMQ_TX_DB_URL: urlFor(userOf(component)), ROCKETMQ_ENDPOINTS: ENDPOINTS },
    },
    onSignal: () => () => undefined,
  };
  const code = await main(argv, ctx);
  return { code, stdout, stderr };
}

/** The driver error code of a rejected query (ER_TABLEACCESS_DENIED_ERROR etc.). */
async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return String((err as { code?: unknown }).code);
  }
  return 'accepted';
}

describe('least privilege: every component under a MariaDB user with only its documented grants', () => {
  let root: DataSource;
  /** root on the scratch database: sets up and inspects rows. */
  let admin: DataSource;
  const ds: Partial<Record<GrantComponent, DataSource>> = {};
  let producer: TransactionalProducer;
  let consumer: IdempotentConsumer;
  let relay: OutboxRelay;
  const answers: CheckBackOutcome[] = [];
  const applied: Envelope[] = [];
  const hooks: { dropEnd: boolean; holdUntilFenced: boolean } = { dropEnd: false, holdUntilFenced: false };

  const row = async (sql: string, params: unknown[] = []) =>
    ((await admin.query(sql, params)) as Array<Record<string, unknown>>)[0];
  const grant = async (statements: string[]) => {
    for (const s of statements) await root.query(s);
  };
  let tablesAfterRevert: string[] = [];
  const tables = async () =>
    (
      (await root.query(
        'SELECT table_name AS t FROM information_schema.tables WHERE table_schema = ? ORDER BY 1',
        [SCRATCH],
      )) as Array<{ t: string }>
    ).map((r) => r.t);
  const accounts = (c: GrantComponent) => HOSTS.map((h) => `'${userOf(c)}'@'${h}'`);

  beforeAll(async () => {
    root = await new DataSource({ type: 'mysql', url: DB_URL, poolSize: 2 }).initialize();
    await root.query(`DROP DATABASE IF EXISTS ${SCRATCH}`);
    await root.query(`CREATE DATABASE ${SCRATCH}`);
    admin = await new DataSource({
      type: 'mysql',
      url: DB_URL.replace(/\/[^/?]*(\?|$)/, `/${SCRATCH}$1`),
      poolSize: 2,
    }).initialize();
    for (const c of GRANT_COMPONENTS) {
      for (const account of accounts(c)) {
        await root.query(`DROP USER IF EXISTS ${account}`);
        await root.query(`CREATE USER ${account} IDENTIFIED BY '${password}'`);
      }
    }
    // Table-level grants on tables that do not exist yet: MariaDB/MySQL accept CREATE (only).
    for (const account of accounts('migrations')) {
      await grant(
        rocketMqTxGrants('migrations', {
          database: SCRATCH,
          user: account,
          migrationsTableName: MIGRATIONS_TABLE,
        }),
      );
    }
    const deploy = dataSourceFor('migrations', {
      migrations: [...rocketMqTxMigrations, ...rocketMqTxArchiveMigrations],
    });
    ds.migrations = await deploy.initialize();
    await deploy.runMigrations({ transaction: 'none' });
    // Revert every migration (DROP INDEX, DROP TABLE, DELETE from the migrations table), run them again.
    const count = rocketMqTxMigrations.length + rocketMqTxArchiveMigrations.length;
    for (let i = 0; i < count; i++) await deploy.undoLastMigration({ transaction: 'none' });
    tablesAfterRevert = await tables();
    await deploy.runMigrations({ transaction: 'none' });
    for (const c of GRANT_COMPONENTS.filter((x) => x !== 'migrations')) {
      for (const account of accounts(c))
        await grant(rocketMqTxGrants(c, { database: SCRATCH, user: account }));
    }
    // The business tables: the producer's work and the consumer's handler write one each.
    await admin.query('CREATE TABLE lp_order (id VARCHAR(64) PRIMARY KEY)');
    await admin.query(
      'CREATE TABLE lp_effect (event_id CHAR(36) PRIMARY KEY, aggregate_id VARCHAR(128) NOT NULL)',
    );
    for (const account of accounts('producer'))
      await root.query(`GRANT INSERT ON ${SCRATCH}.lp_order TO ${account}`);
    for (const account of accounts('consumer'))
      await root.query(`GRANT INSERT ON ${SCRATCH}.lp_effect TO ${account}`);

    for (const c of ['producer', 'consumer', 'relay', 'status', 'reconcile'] as const) {
      ds[c] = await dataSourceFor(c).initialize();
    }
    producer = makeProducer(
      ds.producer!,
      {
        topics: [TX_TOPIC, NORMAL_TOPIC],
        producerGroup: GROUP,
        logger: quiet,
        checkBack: { onResolved: (o) => answers.push(o) },
      },
      {
        beforeEnd: async () => !hooks.dropEnd,
        afterHalf: async (half) => {
          if (!hooks.holdUntilFenced) return;
          await waitFor(
            () => answers.some((a) => a.messageId === half.messageId && a.resolution === 'ROLLBACK'),
            {
              timeoutMs: 30_000,
              description: 'the check-back fence (producer user) to roll the transaction back',
            },
          );
        },
      },
    );
    consumer = new IdempotentConsumer({
      endpoints: ENDPOINTS,
      dataSource: ds.consumer!,
      consumerGroup: GROUP,
      subscriptions: [
        { topic: TX_TOPIC, tag: TAG },
        { topic: NORMAL_TOPIC, tag: TAG },
      ],
      handlers: [
        on(ItemAdded, async (event, { manager }) => {
          await manager.query('INSERT INTO lp_effect (event_id, aggregate_id) VALUES (?, ?)', [
            event.eventId,
            event.aggregateId,
          ]);
          applied.push(event);
        }),
      ],
      startTimeoutMs: 30_000,
      logger: quiet,
    });
    relay = makeRelay(ds.relay!, {
      topics: [NORMAL_TOPIC],
      discardHorizonMs: 1000,
      reconcileIntervalMs: 200,
      logger: quiet,
    }).relay;
    await Promise.all([producer.start(), consumer.start(), relay.start()]);
  });

  afterAll(async () => {
    await Promise.allSettled([producer?.shutdown(), consumer?.shutdown(), relay?.shutdown()]);
    await Promise.allSettled(Object.values(ds).map((d) => (d.isInitialized ? d.destroy() : undefined)));
    if (admin?.isInitialized) await admin.destroy();
    if (root?.isInitialized) {
      for (const c of GRANT_COMPONENTS) {
        for (const account of accounts(c)) await root.query(`DROP USER IF EXISTS ${account}`);
      }
      await root.query(`DROP DATABASE IF EXISTS ${SCRATCH}`);
      await root.destroy();
    }
  });

  const event = (aggregateId = `cart-${uuidv7()}`) =>
    ItemAdded.create({ aggregateId, aggregateVersion: 1, data: { sku: 'lp' } });
  const isApplied = (eventId: string) => async () =>
    (
      await row('SELECT outcome FROM consumed_event WHERE consumer_group = ? AND event_id = ?', [
        GROUP,
        eventId,
      ])
    )?.outcome === 'APPLIED' && applied.some((e) => e.eventId === eventId);
  const outboxStatus = async (eventId: string) =>
    (await row('SELECT status FROM outbox_event WHERE event_id = ?', [eventId]))?.status;

  /** Inserts one outbox row of `envelope` on NORMAL_TOPIC as the SDK writes it (admin); returns its txId. */
  async function insertOutbox(envelope: Envelope, status: 'IN_FLIGHT' | 'NEW'): Promise<string> {
    const txId = uuidv7();
    const prepared = prepareEvents({ topic: NORMAL_TOPIC, tag: TAG, event: envelope }, txId, {
      topics: [NORMAL_TOPIC],
      maxMessageBytes: 4 * 1024 * 1024,
      producerGroup: GROUP,
    });
    await admin.transaction((m) =>
      new TypeOrmOutboxStore(admin).insertEvents(m, outboxRows(txId, prepared, status)),
    );
    return txId;
  }

  it('the deploy user ran, reverted and ran again the migrations with table-level CREATE/INDEX/DROP/REFERENCES only, and reads no data', async () => {
    const deploy = ds.migrations!;
    expect(tablesAfterRevert).toEqual([MIGRATIONS_TABLE]);
    expect(await tables()).toEqual(
      expect.arrayContaining([
        'aggregate_cursor',
        'consumed_event',
        'outbox_event',
        'outbox_event_archive',
        'tx_record',
      ]),
    );
    expect(await refusal(deploy.query('SELECT COUNT(*) FROM tx_record'))).toBe('ER_TABLEACCESS_DENIED_ERROR');
    // Nothing global: every grant but USAGE names one table of the scratch database.
    for (const c of GRANT_COMPONENTS) {
      const lines = (await root.query(`SHOW GRANTS FOR ${accounts(c)[0]}`)) as Array<Record<string, string>>;
      for (const line of lines.map((l) => Object.values(l)[0]!)) {
        expect(line).toMatch(
          new RegExp(`^GRANT USAGE ON \\*\\.\\* TO |^GRANT [A-Z, ]+ ON \`${SCRATCH}\`\\.\`\\w+\` TO `),
        );
      }
    }
  });

  it('producer: transact commits; a lost EndTransaction is answered COMMIT by the fence; an early check-back fences (producer user)', async () => {
    const id = `order-${uuidv7()}`;
    const committed = event();
    hooks.dropEnd = true;
    const out = await producer.transact({ topic: TX_TOPIC, tag: TAG, event: committed }, async (manager) => {
      await manager.query('INSERT INTO lp_order (id) VALUES (?)', [id]);
    });
    hooks.dropEnd = false;
    // The broker asks; the fence's INSERT hits the producer's row, reads COMMITTED, answers COMMIT.
    await waitFor(() => answers.some((a) => a.txId === out.txId && a.resolution === 'COMMIT'), {
      timeoutMs: 30_000,
      description: 'check-back COMMIT for the transaction whose EndTransaction was dropped',
    });
    await waitFor(isApplied(committed.eventId), {
      timeoutMs: 30_000,
      description: 'the consumer to apply it',
    });
    // Confirmations (UPDATE tx_record / outbox_event) ran under the producer user too.
    await waitFor(
      async () =>
        (await row('SELECT confirmed_at FROM tx_record WHERE tx_id = ?', [out.txId]))?.confirmed_at != null &&
        (await outboxStatus(committed.eventId)) === 'SENT',
      { timeoutMs: 30_000, description: 'tx_record confirmed and outbox row SENT' },
    );

    hooks.holdUntilFenced = true;
    const fencedId = `order-${uuidv7()}`;
    const err = await producer
      .transact({ topic: TX_TOPIC, tag: TAG, event: event() }, async (manager) => {
        await manager.query('INSERT INTO lp_order (id) VALUES (?)', [fencedId]);
      })
      .catch((e: unknown) => e)
      .finally(() => (hooks.holdUntilFenced = false));
    expect(err).toBeInstanceOf(TransactionFencedError);
    expect(
      await row('SELECT status, resolved_by FROM tx_record WHERE tx_id = ?', [
        (err as TransactionFencedError).txId,
      ]),
    ).toEqual({
      status: 'ROLLED_BACK',
      resolved_by: 'CHECK_BACK',
    });
    expect(await row('SELECT id FROM lp_order WHERE id = ?', [fencedId])).toBeUndefined();
  });

  it('relay (relay user): delivers an outbox row and republishes a committed IN_FLIGHT row the broker never confirmed', async () => {
    const viaOutbox = event();
    await producer.transact({ topic: NORMAL_TOPIC, tag: TAG, event: viaOutbox }, async () => undefined, {
      delivery: 'outbox',
    });
    // A discarded half message: IN_FLIGHT, COMMITTED tx_record, older than the discard horizon.
    const discarded = event();
    const txId = await insertOutbox(discarded, 'IN_FLIGHT');
    await admin.query(
      `INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count)
       VALUES (?, 'COMMITTED', 'PRODUCER', ?, ?, 1)`,
      [txId, GROUP, NORMAL_TOPIC],
    );
    await admin.query(
      'UPDATE outbox_event SET next_attempt_at = CURRENT_TIMESTAMP(3) - INTERVAL 1 HOUR WHERE event_id = ?',
      [discarded.eventId],
    );
    await waitFor(isApplied(viaOutbox.eventId), {
      timeoutMs: 30_000,
      description: 'the relayed event applied',
    });
    await waitFor(isApplied(discarded.eventId), {
      timeoutMs: 30_000,
      description: 'the republished event applied',
    });
    await waitFor(async () => (await outboxStatus(discarded.eventId)) === 'SENT', {
      description: 'the republished row SENT',
    });
    expect(await outboxStatus(viaOutbox.eventId)).toBe('SENT');
    expect(relay.stats.republished).toBeGreaterThanOrEqual(1);
    expect(relay.stats.storeErrors).toBe(0);
  });

  it('CLI dead-letter list/replay (deadLetter user) and status (status user); the relay delivers the replayed row', async () => {
    const dead = event();
    await insertOutbox(dead, 'NEW');
    await admin.query(
      "UPDATE outbox_event SET status = 'DEAD', attempts = 9, last_error = 'lp' WHERE event_id = ?",
      [dead.eventId],
    );
    const list = await cli('deadLetter', ['dead-letter', 'list', '--json']);
    expect(list).toMatchObject({ code: 0 });
    expect(JSON.parse(list.stdout)).toMatchObject({ total: 1, events: [{ eventId: dead.eventId }] });
    const replay = await cli('deadLetter', ['dead-letter', 'replay', '--event-id', dead.eventId, '--json']);
    expect(replay).toMatchObject({ code: 0 });
    expect(JSON.parse(replay.stdout)).toMatchObject({ replayed: 1 });
    await waitFor(isApplied(dead.eventId), { timeoutMs: 30_000, description: 'the replayed event applied' });

    const status = await cli('status', ['status', '--json']);
    expect(status).toMatchObject({ code: 0 });
    const report = JSON.parse(status.stdout) as StatusReport;
    expect(report.txRecords.byStatus).toMatchObject({ ROLLED_BACK: 1 });
    expect(report.txRecords.byStatus.COMMITTED).toBeGreaterThanOrEqual(3);
    expect(report.consumedEvents.byConsumerGroup[GROUP]!.APPLIED).toBeGreaterThanOrEqual(4);
  });

  it('CLI archive (retention user) moves old SENT rows and purges old tx_record/consumed_event; FactReconciler (reconcile user) reads the archive and republishes a missing event', async () => {
    await waitFor(
      async () =>
        Number((await row("SELECT COUNT(*) AS n FROM outbox_event WHERE status <> 'SENT'"))?.n) === 0,
      {
        description: 'every outbox row SENT',
      },
    );
    const sent = Number((await row('SELECT COUNT(*) AS n FROM outbox_event'))?.n);
    await admin.query(
      `UPDATE outbox_event SET published_at = CURRENT_TIMESTAMP(3) - INTERVAL 2 DAY,
         next_attempt_at = CURRENT_TIMESTAMP(3) - INTERVAL 2 DAY`,
    );
    await admin.query('UPDATE tx_record SET created_at = CURRENT_TIMESTAMP(3) - INTERVAL 2 DAY');
    await admin.query('UPDATE consumed_event SET consumed_at = CURRENT_TIMESTAMP(3) - INTERVAL 2 DAY');
    const archived = await cli('retention', [
      'archive',
      '--older-than',
      '1d',
      '--consumed-older-than',
      '1d',
      '--check-back-horizon',
      '1h',
      '--json',
    ]);
    expect(archived).toMatchObject({ code: 0 });
    const report = JSON.parse(archived.stdout) as {
      outboxEvents: number;
      txRecords: number;
      consumedEvents: number;
    };
    expect(report.outboxEvents).toBe(sent);
    expect(report.txRecords).toBeGreaterThanOrEqual(4);
    expect(report.consumedEvents).toBeGreaterThanOrEqual(4);
    expect(Number((await row('SELECT COUNT(*) AS n FROM outbox_event_archive'))?.n)).toBe(sent);

    const archivedOne = applied[0]!;
    const missing = `cart-${uuidv7()}`;
    const facts = [archivedOne.aggregateId, missing].map((aggregateId) => ({
      aggregateType: 'LpCart',
      aggregateId,
      eventType: 'LpItemAdded',
      aggregateVersion: 1,
    }));
    const reconciler = new FactReconciler({
      dataSource: ds.reconcile!,
      facts: async ({ cursor }) => (cursor === undefined ? { facts, nextCursor: 1 } : { facts: [] }),
      buildEvent: (fact) => ({ topic: NORMAL_TOPIC, tag: TAG, event: event(fact.aggregateId) }),
      producerGroup: GROUP,
      topics: [NORMAL_TOPIC],
      republish: true,
      logger: quiet,
    });
    const r = await reconciler.run();
    expect(r).toMatchObject({ checked: 2, ok: 1, missingCount: 1, republished: 1 });
    const eventId = r.missing[0]!.eventId!;
    await waitFor(isApplied(eventId), { timeoutMs: 30_000, description: 'the reconciled event applied' });
  });

  it('the grants are minimal where it matters: refused statements fail with ER_TABLEACCESS_DENIED_ERROR', async () => {
    const q = (c: GrantComponent, sql: string) => refusal(ds[c]!.query(sql));
    const DENIED = 'ER_TABLEACCESS_DENIED_ERROR';
    // The consumer cannot touch the fence or the outbox; the relay cannot invent or delete events.
    expect(
      await q(
        'consumer',
        "INSERT INTO tx_record (tx_id, status, resolved_by, producer_group) VALUES ('x', 'COMMITTED', 'PRODUCER', 'g')",
      ),
    ).toBe(DENIED);
    expect(await q('consumer', 'SELECT COUNT(*) FROM outbox_event')).toBe(DENIED);
    expect(await q('relay', "INSERT INTO outbox_event (event_id) VALUES ('x')")).toBe(DENIED);
    expect(await q('relay', 'DELETE FROM outbox_event WHERE 1 = 0')).toBe(DENIED);
    expect(await q('relay', "UPDATE tx_record SET status = 'COMMITTED' WHERE 1 = 0")).toBe(DENIED);
    // The producer cannot delete fence rows nor write the consumers' tables; status only reads.
    expect(await q('producer', 'DELETE FROM tx_record WHERE 1 = 0')).toBe(DENIED);
    expect(await q('producer', 'SELECT COUNT(*) FROM consumed_event')).toBe(DENIED);
    expect(await q('status', "UPDATE outbox_event SET status = 'NEW' WHERE 1 = 0")).toBe(DENIED);
    expect(await q('status', 'SELECT COUNT(*) FROM aggregate_cursor')).toBe(DENIED);
    expect(await q('reconcile', 'DELETE FROM outbox_event WHERE 1 = 0')).toBe(DENIED);
    // Sanity: the same users' own statements are accepted.
    expect(await q('consumer', 'SELECT COUNT(*) FROM consumed_event')).toBe('accepted');
    expect(await q('status', 'SELECT COUNT(*) FROM tx_record')).toBe('accepted');
  });

  it('a missing grant is a typed, non-retriable StoreAccessDeniedError naming the privilege and the table; nothing is committed', async () => {
    for (const account of accounts('producer'))
      await root.query(`REVOKE INSERT ON ${SCRATCH}.outbox_event FROM ${account}`);
    const id = `order-${uuidv7()}`;
    const work = jest.fn(async (manager: EntityManager) => {
      await manager.query('INSERT INTO lp_order (id) VALUES (?)', [id]);
    });
    const err = await producer
      .transact({ topic: TX_TOPIC, tag: TAG, event: event() }, work)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreAccessDeniedError);
    expect(err).toBeInstanceOf(StoreError);
    expect(err).toMatchObject({
      code: 'STORE_ACCESS_DENIED',
      retriable: false,
      privilege: 'INSERT',
      table: 'outbox_event',
    });
    expect((err as Error).message).toMatch(/the database user lacks INSERT on outbox_event/);
    expect(work).not.toHaveBeenCalled();
    expect(await row('SELECT id FROM lp_order WHERE id = ?', [id])).toBeUndefined();

    for (const account of accounts('status'))
      await root.query(`REVOKE SELECT ON ${SCRATCH}.consumed_event FROM ${account}`);
    const statusErr = await collectStatus(ds.status!).catch((e: unknown) => e);
    expect(statusErr).toBeInstanceOf(StoreAccessDeniedError);
    expect(statusErr).toMatchObject({ retriable: false, privilege: 'SELECT', table: 'consumed_event' });
    const cliRun = await cli('status', ['status', '--json']);
    expect(cliRun.code).toBe(1);
    expect(cliRun.stderr).toMatch(/lacks SELECT on consumed_event/);
  });
});
