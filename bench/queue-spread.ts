/**
 * What spreading sends over every queue changes for consumers (issue 16, item 3), on a cluster.
 * rocketmq-client-nodejs only ever writes queue 0 of each broker; the lean transport writes every
 * writable queue. For each transport an OutboxRelay publishes `--events` events to its own
 * NORMAL topic while the consumer group is registered but stopped; then an IdempotentConsumer
 * (concurrency `--concurrency`) drains that backlog and the drain is timed, after a raw
 * SimpleConsumer loop (bench/lib/collector.ts, another group) drained the same backlog. Rounds alternate the
 * transports. Reports the queues written per broker (mqadmin topicStatus) and events/s.
 *
 *   ROCKETMQ_TX_CLUSTER=2 ROCKETMQ_TX_PORT_OFFSET=2500 npm run rocketmq:start
 *   ROCKETMQ_TX_CLUSTER=2 ROCKETMQ_TX_PORT_OFFSET=2500 node -r ts-node/register/transpile-only \
 *     bench/queue-spread.ts [--events=3000] [--rounds=2] [--concurrency=16]
 *
 * Writes bench/results/queue-spread-<id>.md and .json.
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
import { fmt, markdownTable } from './lib/stats';
import { machineDescription } from './lib/system';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const rocketmq = require('../scripts/rocketmq') as {
  topicStatus(topic: string): Promise<Array<{ broker: string; queueId: number; maxOffset: number }>>;
};

type Transport = 'official' | 'lean';
const TOPICS: Record<Transport, string> = { official: 'rmqtx_normal_10', lean: 'rmqtx_normal_11' };

interface Drain {
  transport: Transport;
  round: number;
  queuesWritten: Record<string, number>;
  events: number;
  eventsPerSec: number;
  elapsedMs: number;
  /** The same backlog drained by a raw SimpleConsumer loop (4 receives of 32 in flight, acks awaited). */
  rawEventsPerSec: number;
}

async function offsets(topic: string): Promise<Map<string, number>> {
  return new Map((await rocketmq.topicStatus(topic)).map((q) => [`${q.broker}/${q.queueId}`, q.maxOffset]));
}

async function drainOnce(
  ds: DataSource,
  transport: Transport,
  round: number,
  o: { events: number; concurrency: number },
): Promise<Drain> {
  const topic = TOPICS[transport];
  const tag = `qs_${Date.now().toString(36)}_${transport}`;
  let handled = 0;
  const consumer = () =>
    new IdempotentConsumer({
      endpoints: ENDPOINTS,
      dataSource: ds,
      consumerGroup: `rmqtx_bench_spread_${tag}`,
      subscriptions: [{ topic, tag }],
      handlers: [on(BenchEvent, async () => void handled++)],
      concurrency: o.concurrency,
      startTimeoutMs: 30_000,
      logger: quietLogger,
    });
  // Register the group before anything is published (a new group does not start at the oldest).
  await registerGroup(consumer());
  const raw = await new Collector(topic, tag, `rmqtx_bench_spread_raw_${tag}`).start();
  const before = await offsets(topic);
  const keys = await relayBacklog(ds, topic, tag, o.events, transport);
  const after = await offsets(topic);
  const queuesWritten: Record<string, number> = {};
  for (const [key, max] of after) {
    if (max > (before.get(key) ?? 0)) {
      const broker = key.split('/')[0]!;
      queuesWritten[broker] = (queuesWritten[broker] ?? 0) + 1;
    }
  }

  const drained = await raw.drain(keys, [], 300_000);
  const rawMs = drained.allArrivedMs;
  await raw.stop();
  if (drained.missing.length > 0) throw new Error(`raw drain missed ${drained.missing.length} events`);

  const c = consumer();
  const t0 = performance.now();
  await c.start();
  await until(() => handled >= o.events, 300_000);
  const elapsedMs = performance.now() - t0;
  await c.shutdown();
  return {
    transport,
    round,
    queuesWritten,
    events: handled,
    eventsPerSec: (handled * 1000) / elapsedMs,
    elapsedMs,
    rawEventsPerSec: (drained.received * 1000) / rawMs,
  };
}

async function main(): Promise<void> {
  const o = {
    events: intArg('events', 3000),
    rounds: intArg('rounds', 2),
    concurrency: intArg('concurrency', 16),
  };
  await prepareBenchDatabase();
  const ds = await openBenchDataSource(24);
  const drains: Drain[] = [];
  try {
    for (let round = 1; round <= o.rounds; round++) {
      const order: Transport[] = round % 2 === 1 ? ['official', 'lean'] : ['lean', 'official'];
      for (const transport of order) {
        const d = await drainOnce(ds, transport, round, o);
        drains.push(d);
        console.log(
          `[spread] round ${round} ${transport}: queues written ${JSON.stringify(d.queuesWritten)}, ` +
            `${d.events} events drained in ${fmt(d.elapsedMs, 0)} ms = ${fmt(d.eventsPerSec, 0)}/s ` +
            `(raw SimpleConsumer loop ${fmt(d.rawEventsPerSec, 0)}/s)`,
        );
      }
    }
  } finally {
    await ds.destroy();
  }
  const id = `queue-spread-${Date.now().toString(36)}`;
  const ratios = Array.from({ length: o.rounds }, (_, i) => {
    const of = (t: Transport) => drains.find((d) => d.round === i + 1 && d.transport === t)!.eventsPerSec;
    return of('lean') / of('official');
  });
  const table = markdownTable(
    [
      'round',
      'transport (queues written)',
      'queues written per broker',
      'events',
      'drain ms',
      'IdempotentConsumer events/s',
      'raw loop events/s',
    ],
    drains.map((d) => [
      String(d.round),
      d.transport === 'lean' ? 'lean (every queue)' : 'official (queue 0)',
      JSON.stringify(d.queuesWritten),
      String(d.events),
      fmt(d.elapsedMs, 0),
      fmt(d.eventsPerSec, 0),
      fmt(d.rawEventsPerSec, 0),
    ]),
  );
  const md =
    `## Queue spread and consumer drain ${id}\n\n${machineDescription()}; proxy ${ENDPOINTS}.\n` +
    `${o.events} events per drain, IdempotentConsumer concurrency ${o.concurrency}, one consumer process; ` +
    `per round lean/official drain rate: ${ratios.map((r) => fmt(r, 2)).join(', ')}.\n\n${table}\n`;
  const out = path.join(__dirname, 'results', id);
  writeFileSync(`${out}.md`, md);
  writeFileSync(`${out}.json`, JSON.stringify({ id, options: o, drains, ratios }, null, 2));
  console.log(md);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
