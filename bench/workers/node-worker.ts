/**
 * One bench column in its own process: `ours` (TransactionalProducer.transact, default transport),
 * `publish` (TransactionalProducer.publish inside dataSource.transaction, awaiting its outcome),
 * `official` (ours with `transport: 'official'`), `baseline` (raw rocketmq-client-nodejs + the raw driver, mysql2 or
 * pg, hand-written: half, BEGIN, tx_record, business row, COMMIT, EndTransaction), `raw` (half + EndTransaction,
 * no database: the upper bound) or `rawlean` (raw over the lean transport).
 * Same protocol as bench/java: commands on stdin, one `RESULT {json}` line on stdout each.
 *   run CONCURRENCY DURATION_MS ROLLBACK_EVERY KEY_PREFIX      (KEY_PREFIX = <tag>-<column...>)
 *   mem TOTAL CONCURRENCY KEY_PREFIX                           (ours only: RSS/heap samples)
 *   quit
 * Arguments: MODE TOPIC PRODUCER_GROUP
 */
import { createInterface } from 'node:readline';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import mysql from 'mysql2/promise';
import { Connection as Mysql2Connection } from 'mysql2';
import pg from 'pg';
import { Producer } from 'rocketmq-client-nodejs';
import type { MessageView } from 'rocketmq-client-nodejs';
import { TransactionResolution as Proto } from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb';
import type { DataSource } from 'typeorm';
import { TransactionalProducer } from '../../src';
import { startClient } from '../../src/broker/startup';
import { LeanGateway } from '../../src/broker/lean/LeanGateway';
import { TransactionResolution } from '../../src/checkback/resolution';
import {
  BENCH_DATABASE,
  BENCH_DB_URL,
  ENDPOINTS,
  POOL_SIZE,
  INSERT_BENCH_ORDER,
  openBenchDataSource,
  quietLogger,
  sql,
} from '../lib/env';
import type { CheckBackCounts, RunResult } from '../lib/worker';

type Mode = 'ours' | 'publish' | 'official' | 'baseline' | 'raw' | 'rawlean';
type OneTx = (key: string, rollback: boolean) => Promise<boolean>;

/** Thrown by the bench's work function to roll a transaction back on purpose. */
class PlannedRollback extends Error {}

const [mode, topic, group] = process.argv.slice(2) as [Mode, string, string];
const out = (line: string) => process.stdout.write(line + '\n');

/**
 * Commands this process sends to the database, statements by first word (START, INSERT, COMMIT...),
 * one round trip each: every mysql2 connection (TypeORM's pool and the baseline's) queues each one
 * through addCommand; every pg client (TypeORM's pool and the baseline's) sends each through
 * Client.query. Read and reset by every run.
 */
const dbStatements = new Map<string, number>();
function countStatement(verb: string): void {
  dbStatements.set(verb, (dbStatements.get(verb) ?? 0) + 1);
}
function firstWord(text: string | undefined, otherwise: string): string {
  return /^\s*(\w+)/.exec(text ?? '')?.[1]?.toUpperCase() ?? otherwise;
}
(function countDbStatements() {
  type Command = { constructor: { name: string }; sql?: string };
  const base = Object.getPrototypeOf(Mysql2Connection.prototype) as { addCommand(cmd: Command): unknown };
  const original = base.addCommand;
  base.addCommand = function addCommand(this: unknown, cmd: Command) {
    const kind = cmd.constructor.name;
    // Statements by their first word; other commands (Ping, ClientHandshake, Quit) by name.
    countStatement(kind === 'Query' || kind === 'Execute' ? firstWord(cmd.sql, kind) : kind);
    return original.call(this, cmd);
  };
  const client = pg.Client.prototype as unknown as { query(...args: unknown[]): unknown };
  const query = client.query;
  client.query = function countedQuery(this: unknown, ...args: unknown[]) {
    const first = args[0];
    countStatement(
      firstWord(typeof first === 'string' ? first : (first as { text?: string } | undefined)?.text, 'Query'),
    );
    return query.apply(this, args);
  };
})();

function takeDbStatements(): Record<string, number> {
  const copy = Object.fromEntries(dbStatements);
  dbStatements.clear();
  return copy;
}

function tagOf(key: string): string {
  return key.slice(0, key.indexOf('-'));
}

function body(key: string): string {
  return JSON.stringify({ key });
}

async function setupOurs(): Promise<Setup> {
  const ds: DataSource = await openBenchDataSource(POOL_SIZE);
  const producer = new TransactionalProducer({
    endpoints: ENDPOINTS,
    dataSource: ds,
    producerGroup: group,
    topics: [topic],
    startTimeoutMs: 30_000,
    // `official`: the same producer with every call through rocketmq-client-nodejs; `ours` and
    // `publish` take the default transport (lean).
    ...(mode === 'official' ? { transport: 'official' as const } : {}),
  });
  await producer.start();
  const event = (key: string) => ({ topic, tag: tagOf(key), keys: [key], body: body(key) });
  // `publish`: the caller's own transaction (business row first, then publish), and the
  // transaction counts once its outcome settled (EndTransaction sent after the commit), as
  // transact's promise does.
  const tx: OneTx = async (key, rollback) => {
    try {
      if (mode === 'publish') {
        const published = await ds.transaction(async (manager) => {
          await manager.query(INSERT_BENCH_ORDER, [key, 'bench']);
          const r = await producer.publish(manager, event(key));
          if (rollback) throw new PlannedRollback();
          return r;
        });
        // 'unknown' is still a committed database transaction: the check-back delivers it (the
        // correctness check waits for it). 'rolled_back' after a commit would be a bug.
        const outcome = await published.outcome;
        if (outcome === 'rolled_back') throw new Error('publish outcome rolled_back after COMMIT');
      } else {
        await producer.transact(event(key), async (manager) => {
          await manager.query(INSERT_BENCH_ORDER, [key, 'bench']);
          if (rollback) throw new PlannedRollback();
        });
      }
      return true;
    } catch (err) {
      if (err instanceof PlannedRollback) return false;
      throw err;
    }
  };
  let seen = newCheckBackCounts();
  return {
    tx,
    checks: () => {
      const { commit, rollback, unknown } = producer.stats.checkBack;
      const since = {
        commit: commit - seen.commit,
        rollback: rollback - seen.rollback,
        unknown: unknown - seen.unknown,
      };
      seen = { commit, rollback, unknown };
      return since;
    },
    close: async () => {
      await producer.shutdown();
      await ds.destroy();
    },
  };
}

function rawProducer(check: (view: MessageView) => Promise<Proto>): Producer {
  return new Producer({
    endpoints: ENDPOINTS,
    namespace: '',
    topics: [topic],
    requestTimeout: 3000,
    logger: quietLogger,
    checker: { check },
  });
}

/** What the hand-written baseline needs of its database driver: mysql2 or pg, nothing in between. */
interface BaselineConnection {
  query(text: string, params?: unknown[]): Promise<unknown[]>;
  release(): void;
}
interface BaselinePool {
  query(text: string, params?: unknown[]): Promise<unknown[]>;
  connect(): Promise<BaselineConnection>;
  end(): Promise<void>;
}

function baselinePool(): BaselinePool {
  if (BENCH_DATABASE === 'postgres') {
    const pool = new pg.Pool({ connectionString: BENCH_DB_URL, max: POOL_SIZE });
    return {
      query: async (text, params) => (await pool.query(sql(text), params)).rows,
      connect: async () => {
        const client = await pool.connect();
        return {
          query: async (text, params) => (await client.query(sql(text), params)).rows,
          release: () => client.release(),
        };
      },
      end: () => pool.end(),
    };
  }
  const pool = mysql.createPool({ uri: BENCH_DB_URL, connectionLimit: POOL_SIZE });
  return {
    query: async (text, params) => (await pool.query(text, params))[0] as unknown[],
    connect: async () => {
      const conn = await pool.getConnection();
      return {
        query: async (text, params) => (await conn.query(text, params))[0] as unknown[],
        release: () => conn.release(),
      };
    },
    end: () => pool.end(),
  };
}

async function setupBaseline(): Promise<Setup> {
  const pool = baselinePool();
  const checks = newCheckBackCounts();
  // What a hand-written service would answer: read its own tx_record row.
  const producer = rawProducer(async (view) => {
    const txId = view.properties.get('TX_ID');
    if (!txId) return countCheck(checks, 'unknown', Proto.TRANSACTION_RESOLUTION_UNSPECIFIED);
    const rows = await pool.query('SELECT status FROM tx_record WHERE tx_id = ?', [txId]);
    const row = (rows as Array<{ status: string }>)[0];
    if (!row) return countCheck(checks, 'unknown', Proto.TRANSACTION_RESOLUTION_UNSPECIFIED);
    return row.status === 'COMMITTED'
      ? countCheck(checks, 'commit', Proto.COMMIT)
      : countCheck(checks, 'rollback', Proto.ROLLBACK);
  });
  await startBenchProducer(producer);
  const tx: OneTx = async (key, rollback) => {
    const txId = randomUUID();
    const transaction = producer.beginTransaction();
    await producer.send(
      {
        topic,
        tag: tagOf(key),
        keys: [key],
        body: Buffer.from(body(key)),
        properties: new Map([['TX_ID', txId]]),
      },
      transaction,
    );
    const conn = await pool.connect();
    let committed = false;
    try {
      await conn.query('BEGIN');
      await conn.query(
        'INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count) VALUES (?, ?, ?, ?, ?, ?)',
        [txId, 'COMMITTED', 'PRODUCER', group, topic, 1],
      );
      await conn.query(INSERT_BENCH_ORDER, [key, 'bench']);
      if (rollback) {
        await conn.query('ROLLBACK');
      } else {
        await conn.query('COMMIT');
        committed = true;
      }
    } catch (err) {
      await conn.query('ROLLBACK').catch(() => undefined);
      await transaction.rollback().catch(() => undefined);
      throw err;
    } finally {
      conn.release();
    }
    if (committed) await transaction.commit();
    else await transaction.rollback();
    return committed;
  };
  return {
    tx,
    checks: () => takeChecks(checks),
    close: async () => {
      await producer.shutdown().catch(() => undefined);
      await pool.end();
    },
  };
}

async function setupRaw(): Promise<Setup> {
  // What this column did with each key, so a check-back gets the true answer. The broker also
  // checks half messages that were already ended (RocketMQ reads its op queue lazily); a blind
  // COMMIT would then deliver a transaction the column had rolled back.
  const outcomes = new Map<string, boolean>();
  const checks = newCheckBackCounts();
  const producer = rawProducer(async (view) => {
    const key = view.keys[0];
    const committed = key === undefined ? undefined : outcomes.get(key);
    return countCheck(
      checks,
      committed === undefined ? 'unknown' : committed ? 'commit' : 'rollback',
      committed === undefined
        ? Proto.TRANSACTION_RESOLUTION_UNSPECIFIED
        : committed
          ? Proto.COMMIT
          : Proto.ROLLBACK,
    );
  });
  await startBenchProducer(producer);
  const tx: OneTx = async (key, rollback) => {
    const transaction = producer.beginTransaction();
    await producer.send({ topic, tag: tagOf(key), keys: [key], body: Buffer.from(body(key)) }, transaction);
    outcomes.set(key, !rollback);
    if (rollback) await transaction.rollback();
    else await transaction.commit();
    return !rollback;
  };
  return { tx, checks: () => takeChecks(checks), close: () => producer.shutdown().catch(() => undefined) };
}

/** `raw` over the lean transport (src/broker/lean): half + EndTransaction, no database. */
async function setupRawLean(): Promise<Setup> {
  const outcomes = new Map<string, boolean>();
  const checks = newCheckBackCounts();
  const gateway = new LeanGateway(
    {
      endpoints: ENDPOINTS,
      namespace: '',
      topics: [topic],
      sslEnabled: false,
      requestTimeoutMs: 3000,
      startTimeoutMs: 30_000,
      shutdownTimeoutMs: 5000,
      onCheckBack: async (m) => {
        const committed = m.keys[0] === undefined ? undefined : outcomes.get(m.keys[0]);
        if (committed === undefined) {
          checks.unknown++;
          return TransactionResolution.UNKNOWN;
        }
        checks[committed ? 'commit' : 'rollback']++;
        return committed ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
      },
    },
    quietLogger,
  );
  await gateway.start();
  const tx: OneTx = async (key, rollback) => {
    const half = await gateway.sendHalf({
      topic,
      tag: tagOf(key),
      keys: [key],
      properties: {},
      body: Buffer.from(body(key)),
    });
    outcomes.set(key, !rollback);
    await gateway.endTransaction(half, !rollback);
    return !rollback;
  };
  return { tx, checks: () => takeChecks(checks), close: () => gateway.shutdown() };
}

function newCheckBackCounts(): CheckBackCounts {
  return { commit: 0, rollback: 0, unknown: 0 };
}

function countCheck(c: CheckBackCounts, answer: keyof CheckBackCounts, proto: Proto): Proto {
  c[answer]++;
  return proto;
}

function takeChecks(c: CheckBackCounts): CheckBackCounts {
  const copy = { ...c };
  Object.assign(c, newCheckBackCounts());
  return copy;
}

interface Setup {
  tx: OneTx;
  checks: () => CheckBackCounts;
  close: () => Promise<void>;
}

async function run(
  tx: OneTx,
  concurrency: number,
  durationMs: number,
  rollbackEvery: number,
  prefix: string,
): Promise<RunResult> {
  const r: RunResult = {
    committed: 0,
    rolledBack: 0,
    errors: 0,
    elapsedMs: 0,
    cpuMs: 0,
    latencies: [],
    committedKeys: [],
    rolledBackKeys: [],
  };
  let seq = 0;
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const deadline = start + durationMs;
  const loop = async () => {
    while (performance.now() < deadline) {
      const n = ++seq;
      const key = `${prefix}-${n}`;
      const rollback = rollbackEvery > 0 && n % rollbackEvery === 0;
      const t0 = performance.now();
      try {
        if (await tx(key, rollback)) {
          r.latencies.push(Math.round((performance.now() - t0) * 1000) / 1000);
          r.committedKeys.push(key);
        } else {
          r.rolledBackKeys.push(key);
        }
      } catch (err) {
        r.errors++;
        r.firstError ??= err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      }
    }
  };
  takeDbStatements();
  await Promise.all(Array.from({ length: concurrency }, loop));
  r.elapsedMs = performance.now() - start;
  const cpu = process.cpuUsage(cpu0);
  r.cpuMs = (cpu.user + cpu.system) / 1000;
  r.committed = r.committedKeys.length;
  r.rolledBack = r.rolledBackKeys.length;
  return r;
}

/** TOTAL transactions at CONCURRENCY, sampling RSS and heap (after a GC when --expose-gc) every second. */
async function memory(tx: OneTx, total: number, concurrency: number, prefix: string) {
  const gc = (globalThis as { gc?: () => void }).gc;
  const samples: Array<{ t: number; done: number; rssMb: number; heapUsedMb: number }> = [];
  let seq = 0;
  let done = 0;
  let errors = 0;
  const start = performance.now();
  const sample = () => {
    gc?.();
    const m = process.memoryUsage();
    samples.push({
      t: Math.round(performance.now() - start),
      done,
      rssMb: m.rss / 2 ** 20,
      heapUsedMb: m.heapUsed / 2 ** 20,
    });
  };
  sample();
  const timer = setInterval(sample, 1000);
  const loop = async () => {
    while (seq < total) {
      const key = `${prefix}-${++seq}`;
      try {
        await tx(key, false);
        done++;
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  clearInterval(timer);
  sample();
  return { total, done, errors, elapsedMs: performance.now() - start, gcExposed: gc !== undefined, samples };
}

async function main(): Promise<void> {
  const setups: Record<Mode, () => Promise<Setup>> = {
    ours: setupOurs,
    publish: setupOurs,
    official: setupOurs,
    baseline: setupBaseline,
    raw: setupRaw,
    rawlean: setupRawLean,
  };
  const setup = setups[mode];
  if (!setup) throw new Error(`unknown mode ${String(mode)}`);
  const { tx, checks, close } = await setup();
  out('READY {}');
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const [cmd, ...args] = line.trim().split(' ');
    if (cmd === 'quit') break;
    if (cmd === 'run') {
      const [c, d, rb, prefix] = args;
      const r = await run(tx, Number(c), Number(d), Number(rb), prefix!);
      r.checkBacks = checks();
      r.dbStatements = takeDbStatements();
      out(`RESULT ${JSON.stringify(r)}`);
    } else if (cmd === 'mem') {
      const [total, c, prefix] = args;
      out(`RESULT ${JSON.stringify(await memory(tx, Number(total), Number(c), prefix!))}`);
    }
  }
  await close();
  process.exit(0);
}

main().catch((err: unknown) => {
  process.stderr.write(`worker ${mode} failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

function startBenchProducer(producer: Parameters<typeof startClient>[0]): Promise<void> {
  return startClient(producer, 30_000, {
    what: 'producer',
    endpoints: ENDPOINTS,
    resource: 'bench topics',
    accessKey: undefined,
  });
}
