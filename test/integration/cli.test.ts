import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import {
  rocketMqTxArchiveMigrations,
  rocketMqTxMigrations,
  TypeOrmOutboxStore,
  uuidv7,
  type NewOutboxEvent,
  type StatusReport,
} from '../../src';
import { Collector } from '../helpers/collector';
import {
  TEST_DATABASE,
  ago,
  createScratchDatabase,
  ensureSchema,
  openDataSource,
  qs,
  sql,
} from '../helpers/db';
import { DB_URL, ENDPOINTS, waitFor } from '../helpers/env';
import { buildCli } from '../helpers/buildCli';

const ROOT = resolve(__dirname, '..', '..');
const NORMAL = 'rmqtx_normal_9';
const TX = 'rmqtx_tx_16';
const RUN = Math.random().toString(36).slice(2, 8);
const GROUP = 'rmqtx_cli_it';

interface Result {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * The CLI compiled once for this file (as `npm run build` ships it, into a private folder under
 * node_modules/.cache so its requires resolve): a ts-node child per call costs ~10x the CPU.
 */
const BUILD = join(ROOT, 'node_modules', '.cache', `rmqtx-cli-test-${process.pid}`);

/** The CLI as a child process. */
function start(
  args: string[],
  env: Record<string, string> = {},
): { child: ChildProcess; out: Result; done: Promise<Result> } {
  const child = spawn(process.execPath, [join(BUILD, 'cli', 'main.js'), ...args], {
    cwd: ROOT,
    env: { ...process.env, ROCKETMQ_TX_DB_URL: DB_URL, ROCKETMQ_ENDPOINTS: ENDPOINTS, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: Result = { code: null, signal: null, stdout: '', stderr: '' };
  child.stdout!.on('data', (d: Buffer) => (out.stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out.stderr += d.toString()));
  const done = new Promise<Result>((res) =>
    child.on('close', (code, signal) => {
      out.code = code;
      out.signal = signal;
      res(out);
    }),
  );
  return { child, out, done };
}

const cli = (args: string[], env: Record<string, string> = {}) => start(args, env).done;

function json<T>(r: Result): T {
  try {
    return JSON.parse(r.stdout) as T;
  } catch {
    throw new Error(`not JSON (exit ${r.code}): ${r.stdout}\n${r.stderr}`);
  }
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

function outboxEvent(
  topic: string,
  status: 'NEW' | 'IN_FLIGHT',
  extra: Partial<NewOutboxEvent> = {},
): NewOutboxEvent {
  const eventId = uuidv7();
  const txId = extra.txId ?? uuidv7();
  return {
    eventId,
    txId,
    topic,
    keys: [eventId],
    properties: { EVENT_ID: eventId, TX_ID: txId, TX_ORIGIN: GROUP, CLI_RUN: RUN },
    body: Buffer.from(JSON.stringify({ run: RUN, eventId })),
    status,
    ...extra,
  };
}

describe(`rocketmq-tx CLI as a child process (real database: ${TEST_DATABASE}, real broker)`, () => {
  let ds: DataSource;
  let store: TypeOrmOutboxStore;
  const mine: string[] = [];
  const myTxIds: string[] = [];

  async function insert(events: NewOutboxEvent[]): Promise<string[]> {
    await ds.transaction((m) => store.insertEvents(m, events));
    const ids = events.map((e) => e.eventId);
    mine.push(...ids);
    return ids;
  }

  async function rows(ids: readonly string[]) {
    const r: Array<{ event_id: string; status: string; attempts: number; lease_owner: string | null }> =
      await ds.query(
        sql(
          `SELECT event_id, status, attempts, lease_owner FROM outbox_event WHERE event_id IN (${qs(ids.length)})`,
        ),
        [...ids],
      );
    return new Map(r.map((x) => [x.event_id, { ...x, attempts: Number(x.attempts) }]));
  }

  beforeAll(async () => {
    await buildCli(BUILD);
    ds = await openDataSource();
    await ensureSchema(ds);
    store = new TypeOrmOutboxStore(ds);
  }, 180_000);

  afterAll(async () => {
    // Only this file's rows.
    for (let i = 0; i < mine.length; i += 500) {
      const ids = mine.slice(i, i + 500);
      await ds.query(sql(`DELETE FROM outbox_event WHERE event_id IN (${qs(ids.length)})`), ids);
    }
    if (myTxIds.length > 0) {
      await ds.query(sql(`DELETE FROM tx_record WHERE tx_id IN (${qs(myTxIds.length)})`), myTxIds);
    }
    await ds?.destroy();
    rmSync(BUILD, { recursive: true, force: true });
  });

  it('bad flags exit 2 naming the flag; an unreachable database or broker exits 1 in one masked line', async () => {
    const bad = await cli(['relay', '--topics', NORMAL, '--batch-size', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(
      /^rocketmq-tx relay: invalid --batch-size "0": expected an integer from 1 to 1000\n/,
    );

    const port = await closedPort();
    const db = await cli(['status'], {
      ROCKETMQ_TX_DB_URL: `mysql://root:Very-Secret-9@127.0.0.1:${port}/test`,
    });
    expect(db.code).toBe(1);
    expect(db.stderr).toBe(
      `rocketmq-tx status: cannot reach the database at mysql://root:***@127.0.0.1:${port}/test: ` +
        `connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
    expect(db.stdout).toBe('');

    const verbose = await cli(['dead-letter', 'list', '--verbose'], {
      ROCKETMQ_TX_DB_URL: `mysql://root@127.0.0.1:${port}/test`,
      ROCKETMQ_TX_DB_PASSWORD: 'Very-Secret-9',
    });
    expect(verbose.code).toBe(1);
    expect(verbose.stderr).toMatch(
      /^rocketmq-tx dead-letter: cannot reach the database at mysql:\/\/root:\*\*\*@/,
    );
    expect(verbose.stderr).toMatch(/\n\s+at /); // the stack only with --verbose
    expect(verbose.stderr).not.toContain('Very-Secret-9');

    const broker = await cli([
      'relay',
      '--topics',
      NORMAL,
      '--endpoints',
      `127.0.0.1:${port}`,
      '--start-timeout',
      '2s',
    ]);
    expect(broker.code).toBe(1);
    expect(broker.stderr.trimEnd().split('\n').pop()).toMatch(
      new RegExp(`^rocketmq-tx relay: cannot reach the RocketMQ proxy at 127\\.0\\.0\\.1:${port}: `),
    );
    expect(broker.stderr).not.toMatch(/\n\s+at /);

    const empty = await createScratchDatabase(`rmqtx_scratch_cli_${RUN}_empty`);
    try {
      const noTables = await cli(['relay', '--topics', NORMAL], { ROCKETMQ_TX_DB_URL: empty.url });
      expect(noTables.code).toBe(1);
      const missing =
        TEST_DATABASE === 'postgres'
          ? '42P01: relation "outbox_event" does not exist'
          : `ER_NO_SUCH_TABLE: Table 'rmqtx_scratch_cli_${RUN}_empty\\.outbox_event' doesn't exist`;
      expect(noTables.stderr).toMatch(new RegExp(`^rocketmq-tx relay: ${missing} .*run the SDK migrations`));
      expect(noTables.stderr.trimEnd().split('\n')).toHaveLength(1);
    } finally {
      await empty.drop();
    }
  });

  it('status counts exactly the rows of a topic, by table and state, with in-doubt transactions and ages', async () => {
    const topic = `rmqtx_cli_status_${RUN}`; // database rows only: no broker traffic on it
    const committed = [uuidv7(), uuidv7(), uuidv7()];
    const fenced = uuidv7();
    myTxIds.push(...committed, fenced);
    await ds.query(
      sql(`INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count, created_at) VALUES
         (?, 'COMMITTED', 'PRODUCER', ?, ?, 1, ${ago(10, 'MINUTE')}),
         (?, 'COMMITTED', 'PRODUCER', ?, ?, 1, ${ago(5, 'MINUTE')}),
         (?, 'COMMITTED', 'CHECK_BACK', ?, ?, 1, CURRENT_TIMESTAMP(3)),
         (?, 'ROLLED_BACK', 'CHECK_BACK', ?, ?, 0, CURRENT_TIMESTAMP(3))`),
      [
        committed[0],
        GROUP,
        topic,
        committed[1],
        GROUP,
        topic,
        committed[2],
        GROUP,
        topic,
        fenced,
        GROUP,
        topic,
      ],
    );
    await insert([
      outboxEvent(topic, 'IN_FLIGHT', { txId: committed[0]! }),
      outboxEvent(topic, 'IN_FLIGHT', { txId: committed[1]! }),
      outboxEvent(topic, 'NEW', { txId: committed[2]! }),
      outboxEvent(topic, 'NEW'),
      outboxEvent(topic, 'NEW'),
      outboxEvent(topic, 'NEW'),
      outboxEvent(topic, 'NEW'),
    ]);
    const ids = mine.slice(-7);
    await ds.query(
      sql(
        `UPDATE outbox_event SET status = 'SENT', published_at = CURRENT_TIMESTAMP(3) WHERE event_id IN (?, ?)`,
      ),
      [ids[3], ids[4]],
    );
    await ds.query(
      sql(`UPDATE outbox_event SET status = 'DEAD', attempts = 10, last_error = 'x' WHERE event_id = ?`),
      [ids[5]],
    );

    const r = await cli(['status', '--topic', topic, '--json']);
    expect(r.code).toBe(0);
    const s = json<StatusReport>(r);
    expect(s.filter.topics).toEqual([topic]);
    expect(s.txRecords.total).toBe(4);
    expect(s.txRecords.byStatus).toEqual({ COMMITTED: 3, ROLLED_BACK: 1 });
    expect(s.txRecords.byStatusAndResolvedBy).toEqual({
      COMMITTED: { PRODUCER: 2, CHECK_BACK: 1 },
      ROLLED_BACK: { PRODUCER: 0, CHECK_BACK: 1 },
    });
    expect(s.inDoubt.transactions).toBe(2);
    expect(s.inDoubt.events).toBe(2);
    expect(s.inDoubt.oldestAgeMs).toBeGreaterThanOrEqual(600_000);
    expect(s.inDoubt.oldestAgeMs).toBeLessThan(3_600_000);
    expect(s.outbox.byTopic[topic]!.byStatus).toEqual({ NEW: 2, IN_FLIGHT: 2, SENT: 2, DEAD: 1, CDC: 0 });
    expect(s.outbox.total).toBe(7);
    expect(s.outbox.undelivered).toBe(4);
    expect(s.outbox.dead).toBe(1);
    expect(s.outbox.oldestUndeliveredAgeMs).toBeGreaterThanOrEqual(600_000);

    const table = await cli(['status', '--topic', topic]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^tx_record: 4 rows$/m);
    expect(table.stdout).toMatch(/^COMMITTED\s+2\s+1\s+3$/m);
    expect(table.stdout).toMatch(/^ROLLED_BACK\s+0\s+1\s+1$/m);
    expect(table.stdout).toMatch(
      /^in doubt \(committed, broker commit not confirmed\): 2 transactions, 2 events, oldest 10 m \d\d s$/m,
    );
    expect(table.stdout).toMatch(
      new RegExp(`^${topic}\\s+2\\s+2\\s+2\\s+1\\s+0\\s+7\\s+10 m \\d\\d s$`, 'm'),
    );
    expect(table.stdout).toMatch(/^1 DEAD event: rocketmq-tx dead-letter list$/m);
    expect(table.stderr).toBe('');
  });

  it('dead-letter list shows DEAD rows with last_error; replay changes exactly the chosen rows', async () => {
    const ids = await insert([
      outboxEvent(NORMAL, 'NEW'),
      outboxEvent(NORMAL, 'NEW'),
      outboxEvent(NORMAL, 'NEW'),
    ]);
    await ds.query(
      sql(`UPDATE outbox_event SET status = 'DEAD', attempts = 10, last_error = CONCAT('BrokerUnavailableError: boom ${RUN} ', event_id)
       WHERE event_id IN (?, ?, ?)`),
      ids,
    );
    const list = await cli(['dead-letter', 'list', '--event-id', ids.join(','), '--json']);
    expect(list.code).toBe(0);
    const listed = json<{
      total: number;
      events: Array<{ eventId: string; attempts: number; lastError: string; topic: string }>;
    }>(list);
    expect(listed.total).toBe(3);
    expect(listed.events.map((e) => e.eventId)).toEqual(ids);
    for (const e of listed.events) {
      expect(e).toMatchObject({
        topic: NORMAL,
        attempts: 10,
        lastError: `BrokerUnavailableError: boom ${RUN} ${e.eventId}`,
      });
    }
    const table = await cli(['dead-letter', 'list', '--topic', NORMAL, '--limit', '100000']);
    expect(table.code).toBe(0);
    for (const id of ids)
      expect(table.stdout).toMatch(new RegExp(`^${id}\\s+${NORMAL}\\s.*\\s10\\s.*boom ${RUN} ${id}$`, 'm'));

    const dry = await cli(['dead-letter', 'replay', '--event-id', ids[0]!, '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(/Dry run: 1 DEAD event would be replayed \(nothing changed\)/);
    expect((await rows(ids)).get(ids[0]!)!.status).toBe('DEAD');

    const missing = uuidv7();
    const one = await cli(['dead-letter', 'replay', '--event-id', `${ids[0]},${missing}`, '--json']);
    expect(one.code).toBe(1); // an id that was not DEAD is reported and fails the run
    expect(json<{ replayed: number; notDead: unknown[] }>(one)).toMatchObject({
      replayed: 1,
      notDead: [{ eventId: missing, status: 'missing' }],
    });
    let now = await rows(ids);
    expect(now.get(ids[0]!)).toMatchObject({ status: 'NEW', attempts: 0 });
    expect(now.get(ids[1]!)).toMatchObject({ status: 'DEAD', attempts: 10 });

    const again = await cli(['dead-letter', 'replay', '--event-id', ids[0]!]);
    expect(again.code).toBe(1);
    expect(again.stdout).toContain(`Not replayed: ${ids[0]} is NEW`);

    const all = await cli(['dead-letter', 'replay', '--all', '--topic', NORMAL]);
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/Replayed \d+ DEAD events? to NEW/);
    now = await rows(ids);
    for (const id of ids) expect(now.get(id)).toMatchObject({ status: 'NEW', attempts: 0 });
    expect(Number(/Replayed (\d+)/.exec(all.stdout)![1])).toBeGreaterThanOrEqual(2);
  });

  it('relay delivers NEW rows to the broker and stops on SIGTERM without leaving a row leased; SIGINT too', async () => {
    const normal = await new Collector(NORMAL).start();
    const tx = await new Collector(TX).start();
    try {
      const ids = await insert([
        ...Array.from({ length: 600 }, () => outboxEvent(NORMAL, 'NEW')),
        ...Array.from({ length: 4 }, () => outboxEvent(TX, 'NEW')),
      ]);
      const relayArgs = (id: string) => [
        'relay',
        '--topics',
        `${NORMAL},${TX}`,
        '--transaction-topics',
        TX,
        '--relay-id',
        id,
        '--batch-size',
        '5',
        '--poll-interval',
        '100ms',
        '--progress-interval',
        '1s',
        '--start-timeout',
        '30s',
        '--json',
      ];
      const sentOf = async () => [...(await rows(ids)).values()].filter((r) => r.status === 'SENT').length;
      const first = start(relayArgs(`cli-it-${RUN}-1`));
      await waitFor(
        async () => (await sentOf()) >= 5 && /relay cli-it-\w+-1: claimed \d+/.test(first.out.stderr),
        {
          timeoutMs: 90_000,
          description: `first relay progress: ${first.out.stderr}`,
        },
      );
      first.child.kill('SIGTERM');
      const r1 = await first.done;
      expect(r1.stderr).toMatch(/SIGTERM: no new claims; finishing in-flight sends/);
      expect(r1.code).toBe(0);
      const stats = json<{ stopped: string; stats: { sent: number; dead: number } }>(r1);
      expect(stats.stopped).toBe('SIGTERM');
      // Every row it claimed was finished (SENT or rescheduled): no lease left behind.
      let state = await rows(ids);
      expect([...state.values()].filter((r) => r.lease_owner !== null)).toEqual([]);
      const sentAfterFirst = [...state.values()].filter((r) => r.status === 'SENT').map((r) => r.event_id);
      expect(stats.stats.sent).toBeGreaterThanOrEqual(sentAfterFirst.length);
      // What it marked SENT is on the broker.
      await waitFor(
        () =>
          sentAfterFirst.every(
            (id) => normal.withProperty('EVENT_ID', id).length + tx.withProperty('EVENT_ID', id).length > 0,
          ),
        { timeoutMs: 60_000, description: 'messages of the rows the first relay marked SENT' },
      );

      const second = start(relayArgs(`cli-it-${RUN}-2`));
      // Started too, so the signal meets a running relay (the first may have sent everything).
      await waitFor(
        async () => /relay cli-it-\w+-2 started/.test(second.out.stderr) && (await sentOf()) === ids.length,
        {
          timeoutMs: 120_000,
          description: `all ${ids.length} rows SENT by the second relay`,
        },
      );
      second.child.kill('SIGINT');
      const r2 = await second.done;
      expect(r2.code).toBe(0);
      expect(r2.stderr).toMatch(/SIGINT: no new claims/);
      expect(r2.stderr).toMatch(/relay cli-it-\w+-2 stopped: claimed \d+, sent \d+/);
      state = await rows(ids);
      expect([...state.values()].every((r) => r.status === 'SENT' && r.lease_owner === null)).toBe(true);
      await waitFor(
        () =>
          ids.slice(0, 600).every((id) => normal.withProperty('EVENT_ID', id).length > 0) &&
          ids.slice(600).every((id) => tx.withProperty('EVENT_ID', id).length > 0),
        { timeoutMs: 60_000, description: 'every relayed event on the broker' },
      );
      expect(tx.withProperty('CLI_RUN', RUN).every((m) => m.topic === TX)).toBe(true);
    } finally {
      await normal.stop();
      await tx.stop();
    }
  });

  it('reconcile reports missing facts in a dry run and writes them as NEW rows with --republish', async () => {
    const type = `CliReco${RUN}`;
    const present = await insert(
      [1, 2, 3].map((i) =>
        outboxEvent(NORMAL, 'NEW', {
          aggregateType: type,
          aggregateId: `o${i}`,
          aggregateVersion: 1,
          eventType: 'OrderPlaced',
        }),
      ),
    );
    await ds.query(
      sql(
        `UPDATE outbox_event SET status = 'SENT', published_at = CURRENT_TIMESTAMP(3) WHERE event_id IN (?, ?, ?)`,
      ),
      present,
    );
    const facts = [1, 2, 3, 4, 5].map((i) => ({
      aggregateType: type,
      aggregateId: `o${i}`,
      eventType: 'OrderPlaced',
    }));
    const dir = mkdtempSync(join(tmpdir(), 'rmqtx-cli-'));
    const factsModule = join(dir, 'facts.js');
    writeFileSync(
      factsModule,
      `const { createEnvelope } = require(${JSON.stringify(BUILD)});
const all = JSON.parse(process.env.CLI_IT_FACTS);
exports.facts = async ({ cursor, limit }) => {
  const start = cursor ?? 0;
  const facts = all.slice(start, start + limit);
  return { facts, nextCursor: start + limit < all.length ? start + limit : null };
};
exports.buildEvent = (fact) => ({
  topic: ${JSON.stringify(NORMAL)},
  event: createEnvelope({ ...fact, eventVersion: 1, aggregateVersion: 1, data: { rebuilt: true } }),
});
exports.producerGroup = ${JSON.stringify(GROUP)};
exports.topics = [${JSON.stringify(NORMAL)}];
`,
    );
    const env = { CLI_IT_FACTS: JSON.stringify(facts) };
    const countOf = async () => {
      const r: Array<{ n: string }> = await ds.query(
        sql(`SELECT COUNT(*) AS n FROM outbox_event WHERE aggregate_type = ?`),
        [type],
      );
      return Number(r[0]!.n);
    };
    try {
      const dry = await cli(['reconcile', '--facts', factsModule, '--batch-size', '2', '--json'], env);
      expect(dry.code).toBe(0);
      const d = json<{
        dryRun: boolean;
        pages: number;
        checked: number;
        ok: number;
        missingCount: number;
        missing: Array<{ fact: { aggregateId: string }; outcome: string }>;
      }>(dry);
      expect(d).toMatchObject({ dryRun: true, pages: 3, checked: 5, ok: 3, missingCount: 2 });
      expect(d.missing.map((m) => [m.fact.aggregateId, m.outcome])).toEqual([
        ['o4', 'reported'],
        ['o5', 'reported'],
      ]);
      expect(await countOf()).toBe(3);

      const text = await cli(['reconcile', '--facts', factsModule], env);
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(/^missing\s+2$/m);
      expect(text.stdout).toMatch(new RegExp(`^${type}\\s+o4\\s+OrderPlaced\\s+-\\s+reported\\s+-$`, 'm'));
      expect(text.stdout).toContain('Dry run');

      const wet = await cli(['reconcile', '--facts', factsModule, '--republish', '--json'], env);
      expect(wet.code).toBe(0);
      const w = json<{ dryRun: boolean; republished: number; missing: Array<{ eventId: string }> }>(wet);
      expect(w).toMatchObject({ dryRun: false, republished: 2 });
      const written: Array<{ event_id: string; status: string; tx_id: string; aggregate_id: string }> =
        await ds.query(
          sql(
            `SELECT event_id, status, tx_id, aggregate_id FROM outbox_event WHERE aggregate_type = ? AND aggregate_id IN ('o4', 'o5') ORDER BY aggregate_id`,
          ),
          [type],
        );
      mine.push(...written.map((x) => x.event_id));
      myTxIds.push(...written.map((x) => x.tx_id));
      expect(written.map((x) => [x.aggregate_id, x.status])).toEqual([
        ['o4', 'NEW'],
        ['o5', 'NEW'],
      ]);
      expect(written.map((x) => x.event_id).sort()).toEqual(w.missing.map((m) => m.eventId).sort());

      const after = await cli(['reconcile', '--facts', factsModule, '--json'], env);
      expect(json<{ missingCount: number; pendingDelivery: number; ok: number }>(after)).toMatchObject({
        missingCount: 0,
        pendingDelivery: 2,
        ok: 3,
      });

      const noBuilder = join(dir, 'facts-only.js');
      writeFileSync(noBuilder, 'module.exports = async () => ({ facts: [] });\n');
      const refused = await cli(['reconcile', '--facts', noBuilder, '--republish'], env);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(
        /--republish needs the --facts module .*facts-only\.js to export buildEvent/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('archive --older-than moves old SENT rows in bounded batches (own scratch database), --dry-run counts', async () => {
    const scratch = await createScratchDatabase(`rmqtx_scratch_cli_${RUN}`);
    const url = scratch.url;
    const sds = new DataSource({
      type: TEST_DATABASE,
      url,
      migrations: [...rocketMqTxMigrations, ...rocketMqTxArchiveMigrations],
      migrationsTableName: 'rocketmq_tx_migrations',
      logging: false,
    });
    try {
      await sds.initialize();
      await sds.runMigrations({ transaction: 'none' });
      const s = new TypeOrmOutboxStore(sds);
      const old = Array.from({ length: 7 }, () => outboxEvent(NORMAL, 'NEW'));
      const fresh = Array.from({ length: 2 }, () => outboxEvent(NORMAL, 'NEW'));
      const pending = Array.from({ length: 2 }, () => outboxEvent(NORMAL, 'NEW'));
      await sds.transaction((m) => s.insertEvents(m, [...old, ...fresh, ...pending]));
      const list = (es: NewOutboxEvent[]) => es.map((e) => e.eventId);
      await sds.query(
        sql(`UPDATE outbox_event SET status = 'SENT', published_at = ${ago(2, 'DAY')},
           next_attempt_at = ${ago(2, 'DAY')} WHERE event_id IN (${qs(old.length)})`),
        list(old),
      );
      await sds.query(
        sql(
          `UPDATE outbox_event SET status = 'SENT', published_at = CURRENT_TIMESTAMP(3) WHERE event_id IN (?, ?)`,
        ),
        list(fresh),
      );
      const env = { ROCKETMQ_TX_DB_URL: url };

      const dry = await cli(['archive', '--older-than', '1d', '--dry-run', '--json'], env);
      expect(dry.code).toBe(0);
      expect(json(dry)).toMatchObject({ mode: 'archive', dryRun: true, outboxEvents: 7 });
      const countIn = async (table: string) =>
        Number((await sds.query(`SELECT COUNT(*) AS n FROM ${table}`))[0].n);
      expect(await countIn('outbox_event_archive')).toBe(0);

      const run = await cli(['archive', '--older-than', '1d', '--batch-size', '2'], env);
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(/^outbox_event \(SENT\)\s+7\s+moved to outbox_event_archive$/m);
      expect(run.stderr).toMatch(/archive: outbox_event: 7 rows archived \(4 batches\)/);
      const archived: Array<{ event_id: string }> = await sds.query(
        'SELECT event_id FROM outbox_event_archive',
      );
      expect(archived.map((r) => r.event_id).sort()).toEqual(list(old).sort());
      const left: Array<{ event_id: string }> = await sds.query('SELECT event_id FROM outbox_event');
      expect(left.map((r) => r.event_id).sort()).toEqual([...list(fresh), ...list(pending)].sort());

      const again = await cli(['archive', '--older-than', '1d', '--json'], env);
      expect(json(again)).toMatchObject({ mode: 'archive', outboxEvents: 0 });
    } finally {
      if (sds.isInitialized) await sds.destroy();
      await scratch.drop();
    }
  });
});
