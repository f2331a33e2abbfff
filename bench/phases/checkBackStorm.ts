/**
 * One check-back storm (see bench/checkback-storm.ts): `instances` producer instances, each with
 * its own pool shared with business writers ("the producer flooded"), receive `checks` check-backs
 * at once, answered by the real fence (TxRecordResolver behind the CheckBackDispatcher) against
 * the real database; no broker. Shared by the storm sweep and the main bench's flooded check-back
 * line.
 */
import { performance } from 'node:perf_hooks';
import type { DataSource, EntityManager } from 'typeorm';
import { uuidv7 } from '../../src';
import { CheckBackDispatcher } from '../../src/checkback/CheckBackDispatcher';
import { TxRecordResolver } from '../../src/checkback/fence';
import { TransactionResolution, type CheckBackMessage } from '../../src/checkback/resolution';
import { storesFor, type Stores } from '../../src/store';
import { BENCH_DATABASE, INSERT_BENCH_ORDER, openBenchDataSource, quietLogger, sleep, sql } from '../lib/env';
import { summarize } from '../lib/stats';

const GROUP = 'storm_group';
const TOPIC = 'storm_topic';
/** checkBack.lockWaitTimeoutMs and checkBack.maxQueued: the producer's defaults. */
export const LOCK_WAIT_MS = 2000;
export const MAX_QUEUED = 256;
/** A check asked more often than this is left unresolved (and the run fails). */
const MAX_ROUNDS = 1000;

interface Instance {
  ds: DataSource;
  stores: Stores;
  dispatcher: CheckBackDispatcher;
  decided: Map<string, number>;
}

export interface StormResult {
  instances: number;
  concurrency: number;
  held: number;
  poolPerInstance: number;
  checks: number;
  /** The most times one transaction was checked. */
  maxAsks: number;
  /** Checks sent in all, repeats included. */
  asks: number;
  resolved: number;
  wrong: number;
  resolvedPerSec: number;
  elapsedMs: number;
  checkMsP99: number;
  lockTimeouts: number;
  shed: number;
  maxConnections: number;
  businessTxPerSecBefore: number;
  businessTxPerSecDuring: number;
}

function checkMessage(txId: string): CheckBackMessage {
  return {
    messageId: `m-${txId}`,
    topic: TOPIC,
    keys: [],
    properties: { TX_ID: txId, TX_ORIGIN: GROUP },
    body: Buffer.alloc(0),
    txId,
    origin: GROUP,
  };
}

/** One producer transaction as the SDK writes it: fence row, outbox row, business row. */
async function producerTransaction({ ds, stores }: Instance): Promise<void> {
  const txId = uuidv7();
  const eventId = uuidv7();
  await ds.transaction(async (m: EntityManager) => {
    await stores.txRecords.insertCommitted(m, { txId, producerGroup: GROUP, topic: TOPIC, eventCount: 1 });
    await stores.outbox.insertEvents(m, [
      {
        eventId,
        txId,
        topic: TOPIC,
        keys: [eventId],
        properties: { EVENT_ID: eventId, TX_ID: txId, TX_ORIGIN: GROUP },
        body: Buffer.from('{"flood":true}'),
        status: 'IN_FLIGHT',
      },
    ]);
    await m.query(INSERT_BENCH_ORDER, [txId, 'flood']);
  });
}

async function connections(ds: DataSource): Promise<number> {
  if (BENCH_DATABASE === 'postgres') {
    const [r] = await ds.query(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()',
    );
    return Number(r.n);
  }
  const [r] = await ds.query("SHOW STATUS LIKE 'Threads_connected'");
  return Number(r.Value);
}

export interface StormOptions {
  checks: number;
  held: number;
  holdMs: number;
  pool: number;
  flood: number;
  reaskMs: number;
  /** The fence without its batching queue (one decision per check), for comparison. */
  unbatched?: boolean;
}

/** Tables are not emptied here: the caller prepares the database (txIds are fresh UUIDs). */
export async function storm(nInstances: number, concurrency: number, o: StormOptions): Promise<StormResult> {
  const instances: Instance[] = [];
  for (let i = 0; i < nInstances; i++) {
    const ds = await openBenchDataSource(o.pool);
    const stores = storesFor(ds);
    const decided = new Map<string, number>();
    const dispatcher = new CheckBackDispatcher({
      producerGroup: GROUP,
      builtIn: new TxRecordResolver(stores.txRecords, {
        producerGroup: GROUP,
        lockWaitTimeoutMs: LOCK_WAIT_MS,
        logger: quietLogger,
        ...(o.unbatched ? {} : { batching: { concurrency, maxQueued: MAX_QUEUED } }),
      }),
      resolverScope: 'without-tx-id',
      concurrency,
      maxQueued: MAX_QUEUED,
      logger: quietLogger,
      onResolved: (outcome) => decided.set(outcome.decidedBy, (decided.get(outcome.decidedBy) ?? 0) + 1),
    });
    instances.push({ ds, stores, dispatcher, decided });
  }
  const probe = await openBenchDataSource(1);
  try {
    // The in-doubt transactions: half committed, half absent, `held` still open.
    const committed = Array.from({ length: Math.floor(o.checks / 2) }, () => uuidv7());
    const absent = Array.from({ length: o.checks - committed.length - o.held }, () => uuidv7());
    const held = Array.from({ length: o.held }, () => uuidv7());
    for (let i = 0; i < committed.length; i += 500) {
      const chunk = committed.slice(i, i + 500);
      await probe.query(
        sql(
          `INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count) VALUES ${chunk
            .map(() => "(?, 'COMMITTED', 'PRODUCER', ?, ?, 1)")
            .join(', ')}`,
        ),
        chunk.flatMap((id) => [id, GROUP, TOPIC]),
      );
    }
    // Held ones first, so that their first check meets the open transaction (past the queue bound
    // they would be shed and only asked again after their COMMIT).
    const expected = new Map<string, TransactionResolution>([
      ...held.map((id) => [id, TransactionResolution.COMMIT] as const),
      ...committed.map((id) => [id, TransactionResolution.COMMIT] as const),
      ...absent.map((id) => [id, TransactionResolution.ROLLBACK] as const),
    ]);

    // The business traffic of every instance, on its own pool.
    let running = true;
    let businessTx = 0;
    const flood = instances.flatMap((inst) =>
      Array.from({ length: o.flood }, async () => {
        while (running) {
          await producerTransaction(inst).catch(() => undefined);
          businessTx++;
        }
      }),
    );
    await sleep(3000);
    const before = businessTx;
    await sleep(3000);
    const businessTxPerSecBefore = (businessTx - before) / 3;

    // Held: producer transactions that wrote their fence row and commit after holdMs.
    const holders = held.map((txId, i) => {
      const inst = instances[i % nInstances]!;
      return inst.ds.transaction(async (m) => {
        await inst.stores.txRecords.insertCommitted(m, {
          txId,
          producerGroup: GROUP,
          topic: TOPIC,
          eventCount: 1,
        });
        await sleep(o.holdMs);
      });
    });
    await sleep(100);

    let maxConnections = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        maxConnections = Math.max(maxConnections, await connections(probe).catch(() => 0));
        await sleep(100);
      }
    })();

    // Every in-doubt transaction is checked at once; a check answered UNKNOWN (shed, lock wait)
    // is asked again `reaskMs` later, on its own (the broker's next check, compressed from its
    // transactionCheckInterval), so the rate measured is the fence's, not the check interval's.
    const t0 = performance.now();
    const businessAtStorm = businessTx;
    const answers = new Map<string, TransactionResolution>();
    const heldSet = new Set(held);
    /** When the last check not held by an open transaction got its final answer. */
    let bulkDoneAt = t0;
    let bulkLeft = expected.size - held.length;
    const checkMs: number[] = [];
    let maxAsks = 0;
    let k = 0;
    await Promise.all(
      [...expected.keys()].map(async (txId) => {
        for (let ask = 1; ask <= MAX_ROUNDS; ask++) {
          maxAsks = Math.max(maxAsks, ask);
          const inst = instances[k++ % nInstances]!;
          const s = performance.now();
          const answer = await inst.dispatcher.handle(checkMessage(txId));
          checkMs.push(performance.now() - s);
          if (answer !== TransactionResolution.UNKNOWN) {
            answers.set(txId, answer);
            if (!heldSet.has(txId) && --bulkLeft === 0) bulkDoneAt = performance.now();
            return;
          }
          await sleep(o.reaskMs);
        }
      }),
    );
    const elapsedMs = performance.now() - t0;
    const businessTxPerSecDuring = ((businessTx - businessAtStorm) / elapsedMs) * 1000;
    sampling = false;
    running = false;
    await Promise.all([sampler, ...flood, ...holders.map((h) => h.catch(() => undefined))]);

    let wrong = 0;
    for (const [txId, answer] of answers) if (answer !== expected.get(txId)) wrong++;
    const sum = (key: string) => instances.reduce((n, inst) => n + (inst.decided.get(key) ?? 0), 0);
    return {
      instances: nInstances,
      concurrency,
      held: o.held,
      poolPerInstance: o.pool,
      checks: o.checks,
      maxAsks,
      asks: k,
      resolved: answers.size,
      wrong,
      // The checks not held by an open producer transaction, over the time they took (the held
      // ones wait for their producer's COMMIT whatever the sizing).
      resolvedPerSec: ((answers.size - held.length) / (bulkDoneAt - t0)) * 1000,
      elapsedMs,
      checkMsP99: summarize(checkMs).p99,
      lockTimeouts: sum('lock_timeout'),
      shed: sum('shed'),
      maxConnections,
      businessTxPerSecBefore,
      businessTxPerSecDuring,
    };
  } finally {
    await probe.destroy();
    for (const inst of instances) await inst.ds.destroy();
  }
}
