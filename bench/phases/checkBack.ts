/**
 * Check-back resolution: N transactions whose EndTransaction is dropped (as if the reply were
 * lost or the process died) are left to the broker's check-back and our tx_record fence. Half of
 * them committed locally (the answer must be COMMIT), half never reached the database (the fence
 * must write a tombstone and answer ROLLBACK).
 */
import { performance } from 'node:perf_hooks';
import type { DataSource } from 'typeorm';
import { TransactionalProducer, type CheckBackOutcome } from '../../src';
import { RocketMqGateway } from '../../src/broker/RocketMqGateway';
import type { BrokerGateway } from '../../src/broker/gateway';
import { summarize, type LatencySummary } from '../lib/stats';
import { ENDPOINTS, GROUPS, INSERT_BENCH_ORDER, sleep } from '../lib/env';

export interface CheckBackReport {
  inDoubt: number;
  expectedCommit: number;
  expectedRollback: number;
  resolved: number;
  wrong: number;
  unresolved: number;
  /** From the first half message to the last resolution. */
  elapsedMs: number;
  resolvedPerSec: number;
  /** Share of transactions whose first check-back that reached us got a final answer. */
  firstCheckShare: number;
  checkBacksAnswered: number;
  unknownAnswers: number;
  /** From a transaction's creation to its final answer. */
  timeToResolveMs: LatencySummary;
  committedKeys: string[];
  rolledBackKeys: string[];
}

/** Thrown by the bench's gateway to make a transaction die after its half message. */
class DieAfterHalf extends Error {}

export async function checkBackPhase(
  ds: DataSource,
  topic: string,
  tag: string,
  n: number,
  timeoutMs: number,
): Promise<CheckBackReport> {
  const doomed = new Set<string>();
  const created = new Map<string, number>();
  const first = new Map<string, string>();
  let answered = 0;
  let unknown = 0;
  const final = new Map<string, { resolution: string; at: number }>();
  const producer = new TransactionalProducer(
    {
      endpoints: ENDPOINTS,
      dataSource: ds,
      producerGroup: GROUPS.checkBack,
      topics: [topic],
      startTimeoutMs: 30_000,
      checkBack: {
        concurrency: 8,
        maxQueued: 4096,
        onResolved: (o: CheckBackOutcome) => {
          answered++;
          const txId = o.txId;
          if (!txId) return;
          if (!first.has(txId)) first.set(txId, o.resolution);
          if (o.resolution === 'UNKNOWN') unknown++;
          else if (!final.has(txId)) final.set(txId, { resolution: o.resolution, at: performance.now() });
        },
      },
    },
    {
      // The real gateway, with EndTransaction dropped and, for doomed keys, a "crash" after the half.
      gateway: (config, logger) => {
        const real = new RocketMqGateway(config, logger);
        const g: BrokerGateway = {
          start: () => real.start(),
          send: (m) => real.send(m),
          shutdown: () => real.shutdown(),
          sendHalf: async (m) => {
            const half = await real.sendHalf(m);
            const txId = m.properties['TX_ID'];
            if (txId) created.set(txId, performance.now());
            if (m.keys.some((k) => doomed.has(k))) throw new DieAfterHalf();
            return half;
          },
          endTransaction: async () => undefined,
        };
        return g;
      },
    },
  );
  await producer.start();
  const committedKeys: string[] = [];
  const rolledBackKeys: string[] = [];
  const txOf = new Map<string, boolean>();
  const start = performance.now();
  let next = 0;
  const loop = async () => {
    while (next < n) {
      const i = next++;
      const key = `${tag}-cb${i}`;
      const rollback = i % 2 === 1;
      if (rollback) doomed.add(key);
      try {
        const r = await producer.transact({ topic, tag, keys: [key], body: { key } }, async (manager) => {
          await manager.query(INSERT_BENCH_ORDER, [key, 'checkback']);
        });
        txOf.set(r.txId, true);
        committedKeys.push(key);
      } catch (err) {
        // The half was sent and never ended; its txId is known only to the broker: find it by key below.
        if (!rollback) throw err;
        rolledBackKeys.push(key);
      }
    }
  };
  await Promise.all(Array.from({ length: 16 }, loop));
  // txIds of the doomed transactions come back with their check-backs (TX_ID property).
  const deadline = Date.now() + timeoutMs;
  while (final.size < n && Date.now() < deadline) await sleep(200);
  const end = Math.max(...[...final.values()].map((f) => f.at), performance.now() - 1);
  let wrong = 0;
  const ttr: number[] = [];
  for (const [txId, f] of final) {
    const committed = txOf.get(txId) === true;
    if ((f.resolution === 'COMMIT') !== committed) wrong++;
    const t0 = created.get(txId) ?? start;
    ttr.push(f.at - t0);
  }
  const firstFinal = [...first.values()].filter((r) => r !== 'UNKNOWN').length;
  await producer.shutdown();
  return {
    inDoubt: n,
    expectedCommit: committedKeys.length,
    expectedRollback: rolledBackKeys.length,
    resolved: final.size,
    wrong,
    unresolved: n - final.size,
    elapsedMs: end - start,
    resolvedPerSec: (final.size * 1000) / (end - start),
    firstCheckShare: first.size ? firstFinal / first.size : NaN,
    checkBacksAnswered: answered,
    unknownAnswers: unknown,
    timeToResolveMs: summarize(ttr),
    committedKeys,
    rolledBackKeys,
  };
}
