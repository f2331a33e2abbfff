/**
 * The relay alone, side by side in one run: OutboxRelay on both transports with batchesInFlight
 * 1 (claim, send, mark one after another), 2 (the default) and 4, after an untimed warm-up, against raw one-by-one sends of
 * the official client with a relay batch's worth (100) in flight. Each round writes N NEW outbox
 * rows with transact (outbox delivery) and drains them with one configuration; the raw sends send
 * the messages of their own round's rows (same body, keys, tag and properties as the relay's).
 * The order of the configurations is shuffled per round. Ratios are per round (relay / the same
 * round's raw sends).
 *
 *   npm run rocketmq:start
 *   node -r ts-node/register/transpile-only bench/relay-sweep.ts [--events=3000] [--rounds=3] [--only=lean x2]
 *
 * Writes bench/results/relay-sweep-<id>.json and prints a table.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { seeded, shuffleInPlace } from '../src/testing/random';
import { TOPICS, intArg, openBenchDataSource, prepareBenchDatabase } from './lib/env';
import { RELAY_BATCH as BATCH, type RelayConfig, type TimedRun as Run, timedRun } from './lib/relayRuns';
import { loadAverage, machineDescription } from './lib/system';
import { spread } from './lib/stats';

type Config = RelayConfig & { name: string };
const CONFIGS: Config[] = [
  { name: 'raw sends (official, 100 in flight)', raw: true },
  { name: 'relay official x1', transport: 'official', batchesInFlight: 1 },
  { name: 'relay official x2', transport: 'official', batchesInFlight: 2 },
  { name: 'relay lean x1', transport: 'lean', batchesInFlight: 1 },
  { name: 'relay lean x2', transport: 'lean', batchesInFlight: 2 },
  { name: 'relay lean x4', transport: 'lean', batchesInFlight: 4 },
];
/** `--only=lean` keeps the configurations whose name contains it (for profiling one of them). */
const ONLY = process.argv.find((x) => x.startsWith('--only='))?.slice('--only='.length);
const topic = TOPICS.normal;

const median = (xs: readonly number[]): number => spread(xs).median;

async function main(): Promise<void> {
  const n = intArg('events', 3000);
  const rounds = intArg('rounds', 3);
  const id = `rs${Date.now().toString(36)}`;
  const machine = machineDescription();
  process.stderr.write(
    `relay sweep ${id}: ${n} events x ${rounds} rounds; ${machine}; load ${loadAverage()}\n`,
  );
  await prepareBenchDatabase();
  const ds = await openBenchDataSource(8);
  const random = seeded(Date.now() >>> 0);
  const configs = CONFIGS.filter((c) => ONLY === undefined || c.name.includes(ONLY) || c.raw);
  const runs = new Map<string, Run[]>(configs.map((c) => [c.name, []]));
  const ratios = new Map<string, number[]>(configs.map((c) => [c.name, []]));
  const measure = (c: Config, tag: string, count: number): Promise<Run> =>
    timedRun(ds, topic, c, tag, count, 120_000);
  try {
    // Warm-up (not counted): every configuration once on a fifth of the events, so JIT, pools and
    // the broker's caches are warm before the first timed round.
    for (const [k, c] of CONFIGS.entries())
      await measure(c, `${id}_w_${k}`, Math.max(100, Math.trunc(n / 5)));
    for (let r = 0; r < rounds; r++) {
      const order = [...configs];
      shuffleInPlace(order, random);
      const round = new Map<string, number>();
      for (const [k, c] of order.entries()) {
        const run = await measure(c, `${id}_${r}_${k}`, n);
        round.set(c.name, run.eventsPerSec);
        runs.get(c.name)!.push(run);
        process.stderr.write(
          `  round ${r + 1}: ${c.name.padEnd(36)} ${run.eventsPerSec.toFixed(0)} events/s, client ${run.cpuUsPerEvent.toFixed(0)} / broker ${run.brokerUsPerEvent.toFixed(0)} / machine ${run.machineUsPerEvent.toFixed(0)} µs CPU per event, machine ${run.machineBusyPct.toFixed(0)} % busy\n`,
        );
      }
      const raw = round.get(CONFIGS[0]!.name)!;
      for (const c of configs) ratios.get(c.name)!.push(round.get(c.name)! / raw);
    }
  } finally {
    await ds.destroy();
  }
  const rows = configs.map((c) => ({
    config: c.name,
    eventsPerSec: runs.get(c.name)!.map((x) => Math.round(x.eventsPerSec)),
    medianEventsPerSec: Math.round(median(runs.get(c.name)!.map((x) => x.eventsPerSec))),
    medianCpuUsPerEvent: Math.round(median(runs.get(c.name)!.map((x) => x.cpuUsPerEvent))),
    medianBrokerUsPerEvent: Math.round(median(runs.get(c.name)!.map((x) => x.brokerUsPerEvent))),
    medianMachineUsPerEvent: Math.round(median(runs.get(c.name)!.map((x) => x.machineUsPerEvent))),
    medianMachineBusyPct: Math.round(median(runs.get(c.name)!.map((x) => x.machineBusyPct))),
    medianOverRawSends: Number(median(ratios.get(c.name)!).toFixed(2)),
  }));
  const lines = [
    `relay sweep ${id}, ${n} events per configuration, ${rounds} rounds, batchSize ${BATCH}; ${machine}`,
    '| configuration | events/s per round | median | CPU µs/event: client / broker / machine | machine busy | median ratio to raw sends (per round) |',
    '|---|---|---|---|---|---|',
    ...rows.map(
      (x) =>
        `| ${x.config} | ${x.eventsPerSec.join(', ')} | ${x.medianEventsPerSec} | ${x.medianCpuUsPerEvent} / ${x.medianBrokerUsPerEvent} / ${x.medianMachineUsPerEvent} | ${x.medianMachineBusyPct} % | ${x.medianOverRawSends.toFixed(2)}x |`,
    ),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  const file = path.join(__dirname, 'results', `relay-sweep-${id}.json`);
  writeFileSync(
    file,
    `${JSON.stringify({ id, startedAt: new Date().toISOString(), machine, events: n, rounds, batchSize: BATCH, rows }, null, 2)}\n`,
  );
  process.stderr.write(`wrote ${path.relative(process.cwd(), file)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(
    `relay sweep failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
