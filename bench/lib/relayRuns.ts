/**
 * Shared by the bench's relay phase and the relay sweep: one timed run on NEW outbox rows written
 * for it, drained by an OutboxRelay or sent as raw one-by-one sends, with the CPU it took.
 */
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { DataSource } from 'typeorm';
import { OutboxRelay } from '../../src';
import { storesFor } from '../../src/store';
import type { ClaimedOutboxEvent } from '../../src/store/ports';
import { ENDPOINTS, quietLogger, sleep } from './env';
import { startRawProducer, writeNewOutboxRows } from './outboxRows';
import { startProfile } from './profile';
import { brokerPid, machineBusyMs, processCpuMs } from './system';

/** Rows per relay claim, and sends in flight for the raw sender (a relay batch's worth). */
export const RELAY_BATCH = 100;

export interface RelayConfig {
  /** Raw one-by-one sends of the official client, RELAY_BATCH in flight, instead of a relay. */
  raw?: boolean;
  /** The relay's transport; undefined: its default. */
  transport?: 'official' | 'lean';
  /** The relay's batchesInFlight; undefined: its default. */
  batchesInFlight?: number;
}

export interface TimedRun {
  eventsPerSec: number;
  elapsedMs: number;
  sent: number;
  /** Relay send failures (retried) or raw send errors. */
  failed: number;
  /** CPU of this Node process (user + system) per event, in µs. */
  cpuUsPerEvent: number;
  /** CPU of the broker process per event, in µs. */
  brokerUsPerEvent: number;
  /** Busy CPU of the whole machine (all cores) per event, in µs; and its share of all cores. */
  machineUsPerEvent: number;
  machineBusyPct: number;
}

const BROKER = brokerPid();

/** Starts the clocks and CPU counters; the returned function ends them for `sent` events. */
function meter(): (sent: number, failed: number) => TimedRun {
  const own0 = process.cpuUsage();
  const broker0 = processCpuMs(BROKER);
  const machine0 = machineBusyMs();
  const t0 = performance.now();
  return (sent, failed) => {
    const elapsedMs = performance.now() - t0;
    const own = process.cpuUsage(own0);
    const machine = machineBusyMs() - machine0;
    const per = Math.max(sent, 1);
    return {
      eventsPerSec: (sent * 1000) / elapsedMs,
      elapsedMs,
      sent,
      failed,
      cpuUsPerEvent: (own.user + own.system) / per,
      brokerUsPerEvent: ((processCpuMs(BROKER) - broker0) * 1000) / per,
      machineUsPerEvent: (machine * 1000) / per,
      machineBusyPct: (machine / elapsedMs / cpus().length) * 100,
    };
  };
}

/**
 * One timed run of `config` on `n` NEW outbox rows on `topic` with `tag`, written first, untimed
 * (keys `<tag>-<i>`).
 */
export async function timedRun(
  ds: DataSource,
  topic: string,
  config: RelayConfig,
  tag: string,
  n: number,
  timeoutMs: number,
): Promise<TimedRun> {
  await writeNewOutboxRows(ds, topic, tag, `${tag}-`, n);
  return config.raw ? rawSends(ds, topic, tag, n) : drainWithRelay(ds, topic, config, n, timeoutMs);
}

/**
 * An OutboxRelay with `config` drains the `n` NEW rows on `topic`; timed from its start until the
 * last of them reached the broker (the last batch's SENT mark is not waited for).
 */
async function drainWithRelay(
  ds: DataSource,
  topic: string,
  config: RelayConfig,
  n: number,
  timeoutMs: number,
): Promise<TimedRun> {
  const relay = new OutboxRelay({
    endpoints: ENDPOINTS,
    dataSource: ds,
    topics: [topic],
    batchSize: RELAY_BATCH,
    pollIntervalMs: 20,
    reconcileDiscarded: false,
    startTimeoutMs: 30_000,
    logger: quietLogger,
    ...(config.transport ? { transport: config.transport } : {}),
    ...(config.batchesInFlight !== undefined ? { batchesInFlight: config.batchesInFlight } : {}),
  });
  await relay.start();
  // With RELAY_PROFILE=<dir>: a CPU profile of each drain alone, <dir>/relay-<time>.cpuprofile.
  const stopProfile = await startProfile(process.env.RELAY_PROFILE, `relay-${Date.now()}`);
  try {
    const done = meter();
    const deadline = Date.now() + timeoutMs;
    while (relay.stats.sent + relay.stats.dead < n) {
      if (Date.now() > deadline)
        throw new Error(`the relay sent ${relay.stats.sent} of ${n} in ${timeoutMs} ms`);
      await sleep(5);
    }
    return done(relay.stats.sent, relay.stats.failed);
  } finally {
    await stopProfile();
    await relay.shutdown();
  }
}

/**
 * The raw baseline: the `n` NEW outbox rows on `topic` are loaded untimed (leased, so no relay
 * takes them), then their messages (the same topic, tag, keys, properties and body the relay
 * sends) go out as raw one-by-one sends of the official client, RELAY_BATCH in flight; timed from
 * the first send to the last acknowledgement. The rows are marked SENT afterwards, untimed.
 */
async function rawSends(ds: DataSource, topic: string, tag: string, n: number): Promise<TimedRun> {
  const store = storesFor(ds).outbox;
  const owner = `bench-raw-${tag}`;
  const rows: ClaimedOutboxEvent[] = [];
  while (rows.length < n) {
    const claimed = await store.claim({ limit: RELAY_BATCH, leaseMs: 600_000, owner, topics: [topic] });
    if (claimed.length === 0) throw new Error(`only ${rows.length} of ${n} outbox rows to send raw`);
    rows.push(...claimed);
  }
  const raw = await startRawProducer(topic);
  let run: TimedRun;
  try {
    let next = 0;
    let errors = 0;
    const done = meter();
    await Promise.all(
      Array.from({ length: RELAY_BATCH }, async () => {
        while (next < rows.length) {
          const row = rows[next++]!;
          await raw
            .send({
              topic: row.topic,
              ...(row.tag !== undefined ? { tag: row.tag } : {}),
              keys: row.keys,
              properties: new Map(Object.entries(row.properties)),
              body: row.body,
            })
            .catch(() => errors++);
        }
      }),
    );
    run = done(rows.length - errors, errors);
  } finally {
    await raw.shutdown().catch(() => undefined);
  }
  for (let i = 0; i < rows.length; i += RELAY_BATCH) {
    await store.markSentMany(
      rows.slice(i, i + RELAY_BATCH).map((r) => r.eventId),
      owner,
    );
  }
  return run;
}
