/**
 * CDC delivery beside the relay, side by side in one run (issue 17): the same transactions
 * (one event each, `--concurrency` callers) with `delivery: 'cdc'` published by the Debezium engine
 * (`rocketmq-tx cdc`'s engine and supervisor) and with `delivery: 'outbox'` delivered by an
 * OutboxRelay (default options). A raw consumer receives all along; per event, end-to-end latency
 * is receipt time minus the time `transact()` returned (the commit), on this process's clock;
 * throughput is events / (last receipt - first call). Rounds alternate the modes. The engine runs
 * throughout (in relay rounds it reads and skips the relay's rows); the relay runs only in its
 * rounds.
 *
 *   npm run rocketmq:start
 *   node -r ts-node/register/transpile-only bench/cdc.ts [--events=2000] [--concurrency=16] [--rounds=2] [--db=mysql|postgres]
 *
 * Starts the binlog MariaDB (port 3307) or the logical-decoding PostgreSQL (5433) itself. Writes
 * bench/results/cdc-<id>.json and .md.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { SimpleConsumer } from 'rocketmq-client-nodejs';
import { DataSource } from 'typeorm';
import { OutboxRelay, rocketMqTxEntitiesFor, rocketMqTxMigrations, TransactionalProducer } from '../src';
import { assembleEngine, CdcEngineSupervisor } from '../src/cdc/engine';
import { parseFlags } from '../src/cli/args';
import { cdcFlags, planCdc } from '../src/cli/cdc';
import * as binlogDb from '../scripts/mariadb-binlog';
import * as logicalDb from '../scripts/postgres-logical';
import { ENDPOINTS, intArg, quietLogger, sleep, TOPICS } from './lib/env';
import { machineDescription } from './lib/system';
import { summarize, type LatencySummary } from './lib/stats';

const REPO = path.resolve(__dirname, '..');
const TOPIC = TOPICS.normal;
const NAMESRV =
  process.env.ROCKETMQ_NAMESRV ?? `127.0.0.1:${9876 + Number(process.env.ROCKETMQ_TX_PORT_OFFSET || 0)}`;

type Mode = 'cdc' | 'outbox';
interface RoundResult {
  mode: Mode;
  round: number;
  events: number;
  eventsPerSec: number;
  latencyMs: LatencySummary;
}

async function main(): Promise<void> {
  const events = intArg('events', 2000);
  const concurrency = intArg('concurrency', 16);
  const rounds = intArg('rounds', 2);
  const dbArg = process.argv.find((x) => x.startsWith('--db='))?.slice(5) ?? 'mysql';
  if (dbArg !== 'mysql' && dbArg !== 'postgres')
    throw new Error(`--db must be mysql or postgres, got ${dbArg}`);
  const type = dbArg;
  const url = (type === 'mysql' ? await binlogDb.start() : await logicalDb.start()).url;
  const ds = new DataSource({
    type,
    url,
    entities: rocketMqTxEntitiesFor(type),
    migrations: rocketMqTxMigrations,
    migrationsTableName: 'rocketmq_tx_migrations',
    poolSize: concurrency + 4,
    logging: false,
  });
  await ds.initialize();
  await ds.runMigrations();
  const id = `cdc${Date.now().toString(36)}`;
  const tag = `bench_${id}`;

  // Receipt times by EVENT_ID, from a group registered before anything is produced.
  const received = new Map<string, number>();
  let duplicates = 0;
  const consumer = new SimpleConsumer({
    endpoints: ENDPOINTS,
    namespace: '',
    consumerGroup: `bench_cdc_${id}`,
    subscriptions: new Map([[TOPIC, tag]]),
    // As bench/lib/collector.ts: a shorter long poll is refused by the proxy ("deadline time
    // remaining is not enough for polling").
    awaitDuration: 5000,
    requestTimeout: 3000,
    logger: quietLogger,
  });
  await consumer.startup();
  let receiving = true;
  let receiveErrors = 0;
  const receiveLoop = (async () => {
    while (receiving) {
      try {
        const batch = await consumer.receive(32, 15_000);
        const now = performance.now();
        for (const m of batch) {
          const eventId = m.properties.get('EVENT_ID') ?? '';
          if (received.has(eventId)) duplicates++;
          else received.set(eventId, now);
        }
        await Promise.all(batch.map((m) => consumer.ack(m).catch(() => undefined)));
      } catch (err) {
        receiveErrors++;
        if (receiveErrors === 1) console.log(`receive failed (retrying): ${(err as Error).message}`);
        await sleep(100);
      }
    }
  })();

  const producer = new TransactionalProducer({
    endpoints: ENDPOINTS,
    dataSource: ds,
    producerGroup: `bench_cdc_${id}`,
    topics: [TOPIC],
    logger: quietLogger,
  });
  await producer.start();
  const { flags } = parseFlags(cdcFlags, [
    '--db-url',
    url,
    '--namesrv',
    NAMESRV,
    '--name',
    `bench-${type}-${id}`,
  ]);
  const plan = planCdc(flags, {}, REPO);
  const classpath = await assembleEngine(plan.home, (line) => console.log(line));
  // A new engine name: it first snapshots the CDC rows already in the table (earlier runs), so the
  // rounds start only once that backlog is published.
  const supervisor = new CdcEngineSupervisor(plan, classpath, { onNotice: (l) => console.log(l) });
  const engineRun = supervisor.run();
  for (const deadline = Date.now() + 300_000; !supervisor.current.running; await sleep(200)) {
    if (Date.now() > deadline) throw new Error('the CDC engine did not start within 300 s');
  }
  let lastCount = -1;
  for (;;) {
    await sleep(3000);
    if (supervisor.current.published === lastCount) break;
    lastCount = supervisor.current.published;
  }
  console.log(`engine ready; ${supervisor.current.published} older CDC rows published first`);

  const results: RoundResult[] = [];
  const runRound = async (mode: Mode, round: number): Promise<RoundResult> => {
    const relay =
      mode === 'outbox'
        ? new OutboxRelay({ endpoints: ENDPOINTS, dataSource: ds, topics: [TOPIC], logger: quietLogger })
        : undefined;
    await relay?.start();
    const committedAt = new Map<string, number>();
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < events) {
          next++;
          const r = await producer.transact(
            { topic: TOPIC, tag, body: { mode, round, n: next } },
            async () => undefined,
            { delivery: mode },
          );
          committedAt.set(r.eventIds[0]!, performance.now());
        }
      }),
    );
    const ids = [...committedAt.keys()];
    for (const deadline = Date.now() + 300_000; !ids.every((e) => received.has(e)); await sleep(50)) {
      if (Date.now() > deadline) {
        const missing = ids.filter((e) => !received.has(e)).length;
        throw new Error(`${mode} round ${round}: ${missing} of ${ids.length} events not received in 300 s`);
      }
    }
    await relay?.shutdown();
    const last = Math.max(...ids.map((e) => received.get(e)!));
    const result = {
      mode,
      round,
      events: ids.length,
      eventsPerSec: Math.round((ids.length * 1000) / (last - t0)),
      latencyMs: summarize(ids.map((e) => received.get(e)! - committedAt.get(e)!)),
    };
    console.log(
      `${mode.padEnd(6)} round ${round}: ${result.eventsPerSec} events/s, latency p50 ${result.latencyMs.p50.toFixed(0)} ms, ` +
        `p99 ${result.latencyMs.p99.toFixed(0)} ms`,
    );
    return result;
  };
  try {
    for (let r = 1; r <= rounds; r++) {
      const order: Mode[] = r % 2 === 1 ? ['cdc', 'outbox'] : ['outbox', 'cdc'];
      for (const mode of order) results.push(await runRound(mode, r));
    }
  } finally {
    supervisor.stop();
    await engineRun;
    await producer.shutdown();
    receiving = false;
    await receiveLoop;
    await consumer.shutdown().catch(() => undefined);
    await ds.destroy();
  }
  const byMode = (m: Mode) => results.filter((x) => x.mode === m);
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
  const lines = [
    `# CDC vs relay (${type}), run ${id}`,
    '',
    `${events} events per round, ${concurrency} callers, ${rounds} rounds per mode, one event per transaction; ${machineDescription()}`,
    `Engine restarts ${Math.max(0, supervisor.current.restarts)}, duplicate receipts ${duplicates}.`,
    '',
    '| mode | events/s (median) | latency p50 ms | p95 ms | p99 ms | max ms |',
    '| --- | --- | --- | --- | --- | --- |',
    ...(['cdc', 'outbox'] as Mode[]).map((m) => {
      const rs = byMode(m);
      const lat = (k: keyof LatencySummary) => med(rs.map((x) => x.latencyMs[k])).toFixed(0);
      return `| ${m === 'cdc' ? 'CDC (Debezium)' : 'outbox + relay'} | ${med(rs.map((x) => x.eventsPerSec))} | ${lat('p50')} | ${lat('p95')} | ${lat('p99')} | ${lat('max')} |`;
    }),
    '',
  ];
  const out = path.join(__dirname, 'results', `cdc-${type}-${id}`);
  writeFileSync(
    `${out}.json`,
    JSON.stringify({ id, type, events, concurrency, rounds, duplicates, results }, null, 2),
  );
  writeFileSync(`${out}.md`, lines.join('\n'));
  console.log(lines.join('\n'));
  console.log(`written ${out}.json and .md`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
