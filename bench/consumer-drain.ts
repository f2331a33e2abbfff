/**
 * Consumer throughput (issue 14, item 3): one backlog of `--events` events (published by an
 * OutboxRelay while every consumer group below is registered but stopped), drained in turn by
 *   - `raw`: a raw SimpleConsumer loop as a user writes it by hand (bench/lib/collector.ts: 4
 *     receives of 32 in flight, acks awaited), timed until the last event arrived;
 *   - `idempotent`: IdempotentConsumer at `--concurrency`, timed from start() until the handler saw
 *     every event (start-up included).
 * Each drain has its own consumer group, so each one reads the whole backlog. Rounds repeat the
 * pair; the ratio is taken per round (same backlog, adjacent in time).
 *
 *   npm run rocketmq:start
 *   node -r ts-node/register/transpile-only bench/consumer-drain.ts [--events=3000] [--rounds=3] [--concurrency=16]
 *
 * Writes bench/results/consumer-drain-<id>.md and .json.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { DataSource } from 'typeorm';
import { IdempotentConsumer, on } from '../src';
import { ENDPOINTS, intArg, openBenchDataSource, prepareBenchDatabase, quietLogger } from './lib/env';
import { Collector } from './lib/collector';
import { registerGroup, relayBacklog, until } from './lib/backlog';
import { BenchEvent } from './lib/outboxRows';
import { startProfile } from './lib/profile';
import { fmt, markdownTable } from './lib/stats';
import { brokerPid, machineDescription, openWindow, type Window } from './lib/system';

const TOPIC = 'rmqtx_normal_11';

interface Round {
  round: number;
  events: number;
  rawEventsPerSec: number;
  idempotentEventsPerSec: number;
  ratio: number;
  duplicates: number;
  /** From start() to the first event handled (client start-up and the first receive). */
  firstEventMs: number;
  /** Consumer process CPU, broker CPU and machine busy %, per drain. */
  raw: Load;
  idempotent: Load;
}

interface Load {
  workerCpuPct: number;
  brokerCpuPct: number;
  machineBusyPct: number;
  dbCommitsPerSec: number;
}

async function measured<T>(
  ds: DataSource,
  pid: number | undefined,
  work: () => Promise<T>,
): Promise<[T, Load]> {
  const c0 = process.cpuUsage();
  const end = await openWindow(ds, pid);
  const value = await work();
  const w: Window = await end();
  const c = process.cpuUsage(c0);
  return [
    value,
    {
      workerCpuPct: ((c.user + c.system) / 1000 / w.elapsedMs) * 100,
      brokerCpuPct: w.brokerCpuPct,
      machineBusyPct: w.machineBusyPct,
      dbCommitsPerSec: w.dbCommitsPerSec,
    },
  ];
}

async function oneRound(
  ds: DataSource,
  round: number,
  o: { events: number; concurrency: number },
): Promise<Round> {
  const tag = `cd_${Date.now().toString(36)}`;
  const seen = new Set<string>();
  let deliveries = 0;
  let firstAt = 0;
  const consumer = () =>
    new IdempotentConsumer({
      endpoints: ENDPOINTS,
      dataSource: ds,
      consumerGroup: `rmqtx_bench_drain_${tag}`,
      subscriptions: [{ topic: TOPIC, tag }],
      handlers: [
        on(BenchEvent, async (e) => {
          firstAt ||= performance.now();
          deliveries++;
          seen.add(e.data.key);
        }),
      ],
      concurrency: o.concurrency,
      startTimeoutMs: 30_000,
      logger: quietLogger,
    });
  // Register both groups before anything is published (a new group does not start at the oldest).
  await registerGroup(consumer());
  const raw = await new Collector(TOPIC, tag, `rmqtx_bench_drain_raw_${tag}`).start();
  const keys = await relayBacklog(ds, TOPIC, tag, o.events, 'lean');

  const pid = brokerPid();
  const [drained, rawLoad] = await measured(ds, pid, () => raw.drain(keys, [], 300_000));
  await raw.stop();
  if (drained.missing.length > 0) throw new Error(`raw drain missed ${drained.missing.length} events`);
  const rawEventsPerSec = (drained.received * 1000) / drained.allArrivedMs;

  const c = consumer();
  // With DRAIN_PROFILE=<dir>: a CPU profile of the drain alone, <dir>/drain-<round>.cpuprofile.
  const stopProfile = await startProfile(process.env.DRAIN_PROFILE, `drain-${round}`);
  let t0 = 0;
  const [elapsedMs, idemLoad] = await measured(ds, pid, async () => {
    t0 = performance.now();
    await c.start();
    await until(() => seen.size >= o.events, 300_000);
    return performance.now() - t0;
  });
  const firstEventMs = firstAt - t0;
  await stopProfile();
  await c.shutdown();
  const idempotentEventsPerSec = (seen.size * 1000) / elapsedMs;
  return {
    round,
    events: seen.size,
    rawEventsPerSec,
    idempotentEventsPerSec,
    ratio: idempotentEventsPerSec / rawEventsPerSec,
    duplicates: deliveries - seen.size,
    firstEventMs,
    raw: rawLoad,
    idempotent: idemLoad,
  };
}

const load = (l: Load): string =>
  `${fmt(l.workerCpuPct, 0)} / ${fmt(l.brokerCpuPct, 0)} / ${fmt(l.machineBusyPct, 0)}`;

async function main(): Promise<void> {
  const o = {
    events: intArg('events', 3000),
    rounds: intArg('rounds', 3),
    concurrency: intArg('concurrency', 16),
  };
  await prepareBenchDatabase();
  const ds = await openBenchDataSource(24);
  const rounds: Round[] = [];
  try {
    for (let round = 1; round <= o.rounds; round++) {
      const r = await oneRound(ds, round, o);
      rounds.push(r);
      console.log(
        `[drain] round ${round}: raw ${fmt(r.rawEventsPerSec, 0)}/s (${load(r.raw)}), IdempotentConsumer ${fmt(r.idempotentEventsPerSec, 0)}/s (${load(r.idempotent)}) = ${fmt(r.ratio, 2)}x; first event after ${fmt(r.firstEventMs, 0)} ms (${r.duplicates} handler calls for an event already handled)`,
      );
    }
  } finally {
    await ds.destroy();
  }
  const ratios = rounds.map((r) => r.ratio).sort((a, b) => a - b);
  const median = ratios[Math.floor(ratios.length / 2)]!;
  const id = `consumer-drain-${Date.now().toString(36)}`;
  const md = [
    `## Consumer drain ${id}`,
    '',
    `${machineDescription()}; proxy ${ENDPOINTS}.`,
    `${o.events} events per backlog, IdempotentConsumer concurrency ${o.concurrency}; median per-round ratio ${fmt(median, 2)}x (target >= 3x).`,
    '',
    markdownTable(
      [
        'round',
        'events',
        'raw loop events/s',
        'raw: consumer / broker / machine CPU %',
        'IdempotentConsumer events/s',
        'ours: consumer / broker / machine CPU %, DB commits/s',
        'ratio',
        'ms to first event',
        'handler re-calls',
      ],
      rounds.map((r) => [
        String(r.round),
        String(r.events),
        fmt(r.rawEventsPerSec, 0),
        load(r.raw),
        fmt(r.idempotentEventsPerSec, 0),
        `${load(r.idempotent)}, ${fmt(r.idempotent.dbCommitsPerSec, 0)}`,
        fmt(r.ratio, 2),
        fmt(r.firstEventMs, 0),
        String(r.duplicates),
      ]),
    ),
    '',
  ].join('\n');
  const dir = path.join(__dirname, 'results');
  writeFileSync(path.join(dir, `${id}.md`), md);
  writeFileSync(path.join(dir, `${id}.json`), JSON.stringify({ options: o, rounds, median }, null, 2));
  console.log(md);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
