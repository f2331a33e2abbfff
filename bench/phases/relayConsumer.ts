/**
 * Relay throughput (OutboxRelay draining NEW outbox rows) against raw sends of as many normal
 * messages, then consumer overhead: IdempotentConsumer against a raw SimpleConsumer, each
 * consuming the events the relay delivered (each in its own consumer group).
 */
import { performance } from 'node:perf_hooks';
import type { DataSource } from 'typeorm';
import { IdempotentConsumer, on } from '../../src';
import { seeded, shuffleInPlace } from '../../src/testing/random';
import { Collector } from '../lib/collector';
import { ENDPOINTS, sleep } from '../lib/env';
import { BenchEvent } from '../lib/outboxRows';
import { RELAY_BATCH, type RelayConfig, type TimedRun, timedRun } from '../lib/relayRuns';
import { type Spread, spread } from '../lib/stats';

export interface RelayConsumerReport {
  events: number;
  /** Timed rounds; in each, every column runs once on `events` events, in a shuffled order. */
  rounds: number;
  batchSize: number;
  /** OutboxRelay with the default transport (lean), one run per round. */
  relay: TimedRun[];
  /** OutboxRelay with transport 'official' (when the bench runs the transport comparison). */
  relayOfficial?: TimedRun[];
  /** Raw one-by-one sends of the official client, a relay batch's worth in flight. */
  rawSend: TimedRun[];
  rawSendConcurrency: number;
  /** Per round: relay / the same round's raw sends. */
  relayOverRawSend: Spread;
  relayOfficialOverRawSend?: Spread;
  rawConsumer: { elapsedMs: number; eventsPerSec: number; received: number };
  idempotentConsumer: { elapsedMs: number; eventsPerSec: number; handled: number; concurrency: number };
  idempotentOverRaw: number;
}

const rate = (count: number, ms: number): number => (count * 1000) / ms;

async function until(cond: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond() && Date.now() < deadline) await sleep(20);
}

type Column = 'relay' | 'relayOfficial' | 'rawSend';
const CONFIG: Record<Column, RelayConfig> = {
  relay: {},
  relayOfficial: { transport: 'official' },
  rawSend: { raw: true },
};

export async function relayConsumerPhase(
  ds: DataSource,
  topic: string,
  tag: string,
  n: number,
  rounds: number,
  timeoutMs: number,
  withOfficial: boolean,
): Promise<RelayConsumerReport> {
  const relayTag = `${tag}R`;
  const rawGroup = `rmqtx_bench_raw_consumer_${tag}`;
  const sdkGroup = `rmqtx_bench_idem_consumer_${tag}`;
  let handled = 0;
  const makeConsumer = (concurrency: number) =>
    new IdempotentConsumer({
      endpoints: ENDPOINTS,
      dataSource: ds,
      consumerGroup: sdkGroup,
      subscriptions: [{ topic, tag: relayTag }],
      handlers: [
        on(BenchEvent, async () => {
          handled++;
        }),
      ],
      concurrency,
      startTimeoutMs: 30_000,
    });

  // Register both groups before anything is published (a new group's start position is not the oldest).
  const rawConsumer = await new Collector(topic, relayTag, rawGroup).start();
  const register = makeConsumer(1);
  await register.start();
  await sleep(6000);
  await register.shutdown();

  const columns: Column[] = withOfficial ? ['relay', 'relayOfficial', 'rawSend'] : ['relay', 'rawSend'];
  const run = (column: Column, rowTag: string, count: number): Promise<TimedRun> =>
    timedRun(ds, topic, CONFIG[column], rowTag, count, timeoutMs);

  // Warm-up, untimed: every column once on a few batches (JIT, pools, the broker's caches).
  const warmN = Math.min(n, 500);
  for (const column of columns) await run(column, `${tag}W${column}`, warmN);
  // Timed rounds, the columns in a shuffled order each round. Only the default relay's rows of
  // round 0 carry relayTag: the consumers below consume exactly those n events.
  const runs: Record<Column, TimedRun[]> = { relay: [], relayOfficial: [], rawSend: [] };
  const random = seeded(Date.now() >>> 0);
  for (let r = 0; r < rounds; r++) {
    const order = [...columns];
    shuffleInPlace(order, random);
    for (const column of order) {
      const rowTag = column === 'relay' && r === 0 ? relayTag : `${tag}${column}${r}`;
      runs[column].push(await run(column, rowTag, n));
    }
  }
  const keys = Array.from({ length: n }, (_, i) => `${relayTag}-${i}`);
  const perRound = (column: Column): Spread =>
    spread(runs[column].map((x, r) => x.eventsPerSec / runs.rawSend[r]!.eventsPerSec));

  // Timed to the last event's arrival: the drain's closing empty long poll (5 s) is not work.
  const drained = await rawConsumer.drain(keys, [], timeoutMs);
  const rawConsumeMs = drained.allArrivedMs;
  await rawConsumer.stop();

  const concurrency = 16;
  const consumer = makeConsumer(concurrency);
  const i0 = performance.now();
  await consumer.start();
  await until(() => handled >= n, timeoutMs);
  const idemMs = performance.now() - i0;
  await consumer.shutdown();

  return {
    events: n,
    rounds,
    batchSize: RELAY_BATCH,
    relay: runs.relay,
    ...(withOfficial
      ? { relayOfficial: runs.relayOfficial, relayOfficialOverRawSend: perRound('relayOfficial') }
      : {}),
    rawSend: runs.rawSend,
    rawSendConcurrency: RELAY_BATCH,
    relayOverRawSend: perRound('relay'),
    rawConsumer: {
      elapsedMs: rawConsumeMs,
      eventsPerSec: rate(drained.received, rawConsumeMs),
      received: drained.received,
    },
    idempotentConsumer: { elapsedMs: idemMs, eventsPerSec: rate(handled, idemMs), handled, concurrency },
    idempotentOverRaw: rate(handled, idemMs) / rate(drained.received, rawConsumeMs),
  };
}
