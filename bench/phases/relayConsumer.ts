/**
 * Relay throughput (OutboxRelay draining NEW outbox rows) against raw sends of as many normal
 * messages, then consumer overhead: IdempotentConsumer against a raw SimpleConsumer, each
 * consuming the events the relay delivered (each in its own consumer group).
 */
import { performance } from 'node:perf_hooks';
import type { DataSource } from 'typeorm';
import { IdempotentConsumer, OutboxRelay, on } from '../../src';
import { Collector } from '../lib/collector';
import { ENDPOINTS, sleep } from '../lib/env';
import { BenchEvent, rawSends, startRawProducer, writeNewOutboxRows } from '../lib/outboxRows';

interface RelayRun {
  elapsedMs: number;
  eventsPerSec: number;
  batchSize: number;
  sent: number;
  failed: number;
}

export interface RelayConsumerReport {
  events: number;
  /** OutboxRelay over the official client. */
  relay: RelayRun;
  /** OutboxRelay with transport 'lean' (when the bench runs the lean columns). */
  relayLean?: RelayRun;
  relayLeanOverRawSend?: number;
  rawSend: { elapsedMs: number; eventsPerSec: number; concurrency: number; errors: number };
  relayOverRawSend: number;
  rawConsumer: { elapsedMs: number; eventsPerSec: number; received: number };
  idempotentConsumer: { elapsedMs: number; eventsPerSec: number; handled: number; concurrency: number };
  idempotentOverRaw: number;
}

const rate = (count: number, ms: number): number => (count * 1000) / ms;

async function until(cond: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond() && Date.now() < deadline) await sleep(20);
}

export async function relayConsumerPhase(
  ds: DataSource,
  topic: string,
  tag: string,
  n: number,
  timeoutMs: number,
  withLean: boolean,
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

  const writeNewRows = (rowTag: string, prefix: string, count = n): Promise<string[]> =>
    writeNewOutboxRows(ds, topic, rowTag, `${tag}-${prefix}`, count);

  const batchSize = 100;
  // An OutboxRelay over the given transport draining the n NEW rows just written.
  const drainWithRelay = async (transport: 'official' | 'lean', count = n): Promise<RelayRun> => {
    const relay = new OutboxRelay({
      endpoints: ENDPOINTS,
      dataSource: ds,
      topics: [topic],
      batchSize,
      pollIntervalMs: 20,
      reconcileDiscarded: false,
      startTimeoutMs: 30_000,
      transport,
    });
    await relay.start();
    const r0 = performance.now();
    await until(() => relay.stats.sent + relay.stats.dead >= count, timeoutMs);
    const elapsedMs = performance.now() - r0;
    const stats = { ...relay.stats };
    await relay.shutdown();
    return {
      elapsedMs,
      eventsPerSec: rate(stats.sent, elapsedMs),
      batchSize,
      sent: stats.sent,
      failed: stats.failed,
    };
  };

  // Warm-up, untimed: each transport drains a few batches first (JIT, pools, the broker's caches),
  // and the raw producer below sends as many before its timed run.
  const warmN = Math.min(n, 500);
  await writeNewRows(`${tag}W`, 'w', warmN);
  await drainWithRelay('official', warmN);
  if (withLean) {
    await writeNewRows(`${tag}W`, 'wl', warmN);
    await drainWithRelay('lean', warmN);
  }
  const keys = await writeNewRows(relayTag, 'ev');
  const relay = await drainWithRelay('official');
  // The same over the lean transport, on rows of another tag (the consumers below do not see them).
  const relayLean = withLean
    ? (await writeNewRows(`${tag}L`, 'lv'), await drainWithRelay('lean'))
    : undefined;

  // The same number of normal messages with the raw client, as many in flight as a relay batch
  // (after as many untimed sends as the relays' warm-up).
  const raw = await startRawProducer(topic);
  await rawSends(raw, topic, `${tag}W`, warmN, batchSize);
  const s0 = performance.now();
  const errors = await rawSends(raw, topic, `${tag}S`, n, batchSize);
  const sent = n - errors;
  const rawSendMs = performance.now() - s0;
  await raw.shutdown().catch(() => undefined);

  const c0 = performance.now();
  const drained = await rawConsumer.drain(keys, [], timeoutMs);
  const rawConsumeMs = performance.now() - c0;
  await rawConsumer.stop();

  const concurrency = 16;
  const consumer = makeConsumer(concurrency);
  const i0 = performance.now();
  await consumer.start();
  await until(() => handled >= n, timeoutMs);
  const idemMs = performance.now() - i0;
  await consumer.shutdown();

  const rawSendRate = rate(sent, rawSendMs);
  return {
    events: n,
    relay,
    ...(relayLean ? { relayLean, relayLeanOverRawSend: relayLean.eventsPerSec / rawSendRate } : {}),
    rawSend: { elapsedMs: rawSendMs, eventsPerSec: rawSendRate, concurrency: batchSize, errors },
    relayOverRawSend: relay.eventsPerSec / rawSendRate,
    rawConsumer: {
      elapsedMs: rawConsumeMs,
      eventsPerSec: rate(drained.received, rawConsumeMs),
      received: drained.received,
    },
    idempotentConsumer: { elapsedMs: idemMs, eventsPerSec: rate(handled, idemMs), handled, concurrency },
    idempotentOverRaw: rate(handled, idemMs) / rate(drained.received, rawConsumeMs),
  };
}
