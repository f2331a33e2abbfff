/**
 * npm run bench [-- --quick] [-- --profile] [-- --no-java] [-- --no-official]
 *
 * Transactional produce, side by side in one run on the same broker and database, the columns
 * interleaved in short rounds so the noise of a shared machine hits all of them:
 *   ours      TransactionalProducer.transact (half, tx_record + outbox row + business row, commit, end)
 *   publish   TransactionalProducer.publish inside the caller's dataSource.transaction (business row,
 *             tx_record, half, outbox row, commit, end; awaits the outcome)
 *   baseline  raw rocketmq-client-nodejs + mysql2, hand-written (half, tx_record, business row, commit, end)
 *   raw       raw client, half + end, no database (the upper bound)
 *   official  ours with transport: 'official' (every call through rocketmq-client-nodejs)
 *   rawlean   raw over the lean transport (LeanGateway: half + end, no database)
 *   java      rocketmq-client-java 5 + MariaDB Connector/J, the baseline's steps (bench/java)
 * then producer-process scaling, the correctness check (every committed message received, no
 * rolled-back one), check-back resolution, relay and consumer rates, and memory over many
 * transactions. Writes bench/results/<runId>.{md,json,svg} and bench/results/latest.{md,json,svg}.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { checkBackPhase, type CheckBackReport } from './phases/checkBack';
import { storm, type StormResult } from './phases/checkBackStorm';
import { relayConsumerPhase, type RelayConsumerReport } from './phases/relayConsumer';
import { Collector, type DrainReport } from './lib/collector';
import {
  BENCH_DB,
  BENCH_DATABASE,
  BENCH_DB_URL,
  ENDPOINTS,
  GROUPS,
  POOL_SIZE,
  TOPICS,
  openBenchDataSource,
  prepareBenchDatabase,
} from './lib/env';
import { summarizeProfiles } from './lib/profile';
import type { TimedRun } from './lib/relayRuns';
import {
  fmt,
  markdownTable,
  slope,
  spread,
  summarize,
  svgPlot,
  type LatencySummary,
  type Spread,
} from './lib/stats';
import {
  brokerPid,
  loadAverage,
  machineDescription,
  openWindow,
  processCpuMs,
  type Window,
} from './lib/system';
import { Worker, nodeWorkerSpec, type CheckBackCounts, type RunResult, type WorkerSpec } from './lib/worker';

type Column = 'ours' | 'publish' | 'official' | 'baseline' | 'raw' | 'rawlean' | 'java';

interface Settings {
  mode: 'quick' | 'full';
  rounds: number;
  roundMs: number;
  concurrency: number[];
  rollbackEvery: number;
  scalingProcesses: number[];
  scalingConcurrency: number;
  scalingRounds: number;
  checkBackN: number;
  relayN: number;
  /** Interleaved rounds of the relay columns (relay, relay official, raw sends). */
  relayRounds: number;
  /** Check-backs of the flooded storm (the fence's rate, not the broker's check interval). */
  stormChecks: number;
  memoryTx: number;
  memoryConcurrency: number;
  profile: boolean;
  java: boolean;
  /** The transport comparison columns `official` and `rawlean`; `--no-official` skips them. */
  official: boolean;
}

/** One line of the scaling table: k producer processes of `ours`. */
interface ScalingRow {
  processes: number;
  tps: Spread;
  perProcessTps: number;
  p99: number;
  workerCpuPct: number;
  brokerCpuPct: number;
  machineBusyPct: number;
  dbCommitsPerSec: number;
}

interface RoundFigures {
  round: number;
  tps: number;
  p50: number;
  p99: number;
  errors: number;
  firstError?: string;
  workerCpuPct: number;
  checkBacks?: CheckBackCounts;
  /** Transactions attempted (committed and rolled back) and the statements they sent. */
  attempted: number;
  dbStatements?: Record<string, number>;
  window: Window;
}

interface CellFigures {
  column: Column;
  concurrency: number;
  rounds: RoundFigures[];
  tps: Spread;
  latency: LatencySummary;
  errors: number;
  workerCpuPct: number;
  brokerCpuPct: number;
  dbCommitsPerSec: number;
  checkBacks?: CheckBackCounts;
  /** Statements (round trips) per attempted transaction, from the worker's mysql2 or pg connections. */
  dbStatementsPerTx?: number;
  dbStatements?: Record<string, number>;
}

function parseArgs(argv: string[]): Settings {
  const quick = argv.includes('--quick');
  const num = (name: string, dflt: number) => {
    const a = argv.find((x) => x.startsWith(`--${name}=`));
    return a ? Number(a.split('=')[1]) : dflt;
  };
  return {
    mode: quick ? 'quick' : 'full',
    rounds: num('rounds', quick ? 2 : 5),
    roundMs: num('round-ms', quick ? 2500 : 5000),
    concurrency: [1, 16, 64],
    rollbackEvery: 50,
    scalingProcesses: [1, 2, 4],
    scalingConcurrency: 16,
    scalingRounds: num('scaling-rounds', quick ? 1 : 2),
    checkBackN: num('checkback', quick ? 100 : 1000),
    relayN: num('relay', quick ? 2000 : 4000),
    relayRounds: num('relay-rounds', quick ? 3 : 5),
    stormChecks: num('storm', quick ? 1000 : 2000),
    memoryTx: num('memory', quick ? 3000 : 100_000),
    memoryConcurrency: 64,
    profile: argv.includes('--profile'),
    java: !argv.includes('--no-java'),
    official: !argv.includes('--no-official'),
  };
}

const ROOT = path.resolve(__dirname, '..');
const RESULTS = path.join(ROOT, 'bench', 'results');
const TMP = path.join(RESULTS, 'tmp');
const COLORS: Record<Column, string> = {
  ours: '#d62728',
  publish: '#9467bd',
  official: '#ff7f0e',
  baseline: '#1f77b4',
  rawlean: '#bcbd22',
  raw: '#7f7f7f',
  java: '#2ca02c',
};
const log = (msg: string) =>
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

/** Builds bench/java with Maven (jars from Maven Central) and returns how to start it, or why not. */
function javaSpec(): WorkerSpec | string {
  const dir = path.join(ROOT, 'bench', 'java');
  try {
    execFileSync(
      'mvn',
      ['-q', '-B', 'compile', 'dependency:build-classpath', '-Dmdep.outputFile=target/classpath.txt'],
      {
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 300_000,
      },
    );
  } catch (err) {
    const e = err as { stdout?: Buffer; message: string };
    return `maven build failed: ${e.stdout?.toString().slice(-500) ?? e.message}`;
  }
  const cp = `${path.join(dir, 'target', 'classes')}:${readFileSync(path.join(dir, 'target', 'classpath.txt'), 'utf8').trim()}`;
  const u = new URL(BENCH_DB_URL);
  const postgres = BENCH_DATABASE === 'postgres';
  const user = decodeURIComponent(u.username || (postgres ? 'postgres' : 'root'));
  const auth = `user=${encodeURIComponent(user)}${u.password ? `&password=${u.password}` : ''}`;
  const jdbc = postgres
    ? `jdbc:postgresql://${u.hostname}:${u.port || '5432'}${u.pathname}?${auth}`
    : `jdbc:mariadb://${u.hostname}:${u.port || '3306'}${u.pathname}?${auth}`;
  return {
    name: 'java',
    command: 'java',
    args: [
      '-Xmx512m',
      '-Drocketmq.log.level=warn',
      '-cp',
      cp,
      'bench.JavaAnchor',
      ENDPOINTS,
      TOPICS.java,
      jdbc,
      String(POOL_SIZE),
      GROUPS.java,
    ],
  };
}

/** The project's targets at c=64 (medians of per-round ratios): tx/s >= 1.2x baseline and >= 0.8x Java, p99 <= 1.1x baseline. */
function targetText(
  x: { oursOverBaselineTps: Spread; oursOverBaselineP99: Spread; oursOverJavaTps: Spread },
  withJava: boolean,
): string {
  const yes = (ok: boolean): string => (ok ? 'yes' : 'no');
  const parts = [
    `tx/s >= 1.2x baseline: ${yes(x.oursOverBaselineTps.median >= 1.2)}`,
    `p99 <= 1.1x: ${yes(x.oursOverBaselineP99.median <= 1.1)}`,
  ];
  if (withJava) parts.push(`tx/s >= 0.8x java: ${yes(x.oursOverJavaTps.median >= 0.8)}`);
  return parts.join('; ');
}

function checkBackText(c: CheckBackCounts): string {
  return `${c.commit}/${c.rollback}/${c.unknown}`;
}

function sumCheckBacks(rounds: RoundFigures[]): { checkBacks?: CheckBackCounts } {
  const counted = rounds.flatMap((x) => (x.checkBacks ? [x.checkBacks] : []));
  if (counted.length === 0) return {};
  const sum = (k: keyof CheckBackCounts) => counted.reduce((acc, x) => acc + x[k], 0);
  return { checkBacks: { commit: sum('commit'), rollback: sum('rollback'), unknown: sum('unknown') } };
}

function sumStatements(rounds: RoundFigures[]): {
  dbStatementsPerTx?: number;
  dbStatements?: Record<string, number>;
} {
  const counted = rounds.filter((x) => x.dbStatements);
  if (counted.length === 0) return {};
  const total: Record<string, number> = {};
  for (const x of counted)
    for (const [k, v] of Object.entries(x.dbStatements!)) total[k] = (total[k] ?? 0) + v;
  const attempted = counted.reduce((acc, x) => acc + x.attempted, 0);
  const all = Object.values(total).reduce((a, b) => a + b, 0);
  return { dbStatementsPerTx: attempted > 0 ? all / attempted : 0, dbStatements: total };
}

function rotate<T>(xs: readonly T[], k: number): T[] {
  const n = xs.length;
  const r = xs.map((_, i) => xs[(i + k) % n]!);
  return k % 2 ? r.reverse() : r;
}

async function main(): Promise<void> {
  const s = parseArgs(process.argv.slice(2));
  const runId = `r${Date.now().toString(36)}`;
  const startedAt = new Date().toISOString();
  mkdirSync(TMP, { recursive: true });
  log(`run ${runId}, ${s.mode} mode; machine: ${machineDescription()}; load ${loadAverage()}`);
  log(`database ${BENCH_DB} (scratch), broker ${ENDPOINTS}`);
  await prepareBenchDatabase();
  const ds = await openBenchDataSource(4);
  const [server] = (await ds.query('SELECT version() AS v')) as Array<{ v: string }>;
  // The machine line names the database server too (MariaDB or PostgreSQL, and its version).
  const machine = `${machineDescription()}; database ${String(server?.v ?? BENCH_DATABASE).split(' on ')[0]}`;
  log(`database server: ${machine.slice(machine.indexOf('; database ') + 11)}`);
  const pid = brokerPid();

  const profDir = path.join(TMP, `prof-${runId}`);
  const profFlags = (col: Column) =>
    s.profile && (col === 'ours' || col === 'baseline')
      ? ['--cpu-prof', `--cpu-prof-dir=${path.join(profDir, col)}`]
      : [];
  const specs: Partial<Record<Column, WorkerSpec>> = {
    ours: nodeWorkerSpec('ours', 'ours', TOPICS.ours, GROUPS.ours, profFlags('ours')),
    publish: nodeWorkerSpec('publish', 'publish', TOPICS.publish, GROUPS.publish),
    baseline: nodeWorkerSpec('baseline', 'baseline', TOPICS.baseline, GROUPS.baseline, profFlags('baseline')),
    raw: nodeWorkerSpec('raw', 'raw', TOPICS.raw, GROUPS.raw),
    ...(s.official
      ? {
          official: nodeWorkerSpec('official', 'official', TOPICS.official, GROUPS.official),
          rawlean: nodeWorkerSpec('rawlean', 'rawlean', TOPICS.rawlean, GROUPS.rawlean),
        }
      : {}),
  };
  let javaSkipped: string | undefined;
  if (s.java) {
    log('building bench/java with Maven');
    const j = javaSpec();
    if (typeof j === 'string') javaSkipped = j;
    else specs.java = j;
  } else {
    javaSkipped = '--no-java';
  }
  if (javaSkipped) log(`java column skipped: ${javaSkipped}`);
  const columns = (['ours', 'publish', 'official', 'baseline', 'raw', 'rawlean', 'java'] as Column[]).filter(
    (c) => specs[c],
  );

  // Collectors first: their groups must exist before the first message.
  log('starting collectors (one long poll each)');
  const collectors = new Map<string, Collector>();
  for (const c of columns) {
    const topic = TOPICS[c];
    collectors.set(topic, new Collector(topic, runId, `rmqtx_bench_collect_${runId}_${c}`));
  }
  await Promise.all([...collectors.values()].map((c) => c.start()));
  const expected = new Map<string, string[]>();
  const forbidden = new Map<string, string[]>();
  const record = (topic: string, r: { committedKeys: string[]; rolledBackKeys: string[] }) => {
    expected.set(topic, [...(expected.get(topic) ?? []), ...r.committedKeys]);
    forbidden.set(topic, [...(forbidden.get(topic) ?? []), ...r.rolledBackKeys]);
  };

  const workers = new Map<Column, Worker>();
  for (const c of columns) workers.set(c, new Worker(specs[c]!));
  await Promise.all(
    [...workers].map(async ([c, w]) => {
      try {
        await w.ready();
      } catch (err) {
        // The Java column is a reference, not a target: a JVM that cannot start on a loaded
        // machine skips it instead of the whole run.
        if (c !== 'java') throw err;
        javaSkipped = `the Java worker did not start: ${String(err).slice(0, 300)}`;
        log(`java column skipped: ${javaSkipped}`);
        workers.delete(c);
        columns.splice(columns.indexOf(c), 1);
      }
    }),
  );
  log(`workers ready: ${columns.join(', ')}`);

  const runOne = async (col: Column, conc: number, ms: number, label: string) => {
    const w = workers.get(col)!;
    const close = await openWindow(ds, pid);
    const r = await w.command<RunResult>(
      `run ${conc} ${ms} ${s.rollbackEvery} ${runId}-${col}${label}`,
      ms + 120_000,
    );
    const window = await close();
    record(TOPICS[col], r);
    return { r, window };
  };

  log('warm-up (not measured): every column at concurrency 16');
  for (const c of columns) await runOne(c, 16, Math.min(2000, s.roundMs), 'w');

  const cells: CellFigures[] = [];
  const ratioRounds = new Map<
    number,
    {
      tps: number[];
      p99: number[];
      tpsJava: number[];
      officialTps: number[];
      officialP99: number[];
      oursOverOfficial: number[];
      rawleanOverRaw: number[];
      publishOverOurs: number[];
      publishP99OverOurs: number[];
    }
  >();
  for (const conc of s.concurrency) {
    const per = new Map<Column, { rounds: RoundFigures[]; lat: number[] }>();
    for (const c of columns) per.set(c, { rounds: [], lat: [] });
    for (let round = 0; round < s.rounds; round++) {
      for (const col of rotate(columns, round)) {
        const { r, window } = await runOne(col, conc, s.roundMs, `c${conc}r${round}`);
        const lat = summarize(r.latencies);
        const f: RoundFigures = {
          round,
          tps: (r.committed * 1000) / r.elapsedMs,
          p50: lat.p50,
          p99: lat.p99,
          errors: r.errors,
          ...(r.firstError ? { firstError: r.firstError } : {}),
          workerCpuPct: (r.cpuMs / r.elapsedMs) * 100,
          ...(r.checkBacks ? { checkBacks: r.checkBacks } : {}),
          attempted: r.committed + r.rolledBack,
          ...(r.dbStatements ? { dbStatements: r.dbStatements } : {}),
          window,
        };
        per.get(col)!.rounds.push(f);
        per.get(col)!.lat.push(...r.latencies);
        log(
          `c=${conc} round ${round + 1}/${s.rounds} ${col.padEnd(8)} done` +
            (r.checkBacks ? ` check-backs ${checkBackText(r.checkBacks)}` : '') +
            (r.errors ? ` errors ${r.errors}: ${r.firstError}` : ''),
        );
      }
      const ours = per.get('ours')!.rounds[round];
      const base = per.get('baseline')!.rounds[round];
      const java = per.get('java')?.rounds[round];
      const official = per.get('official')?.rounds[round];
      const raw = per.get('raw')?.rounds[round];
      const rawlean = per.get('rawlean')?.rounds[round];
      const rr = ratioRounds.get(conc) ?? {
        tps: [],
        p99: [],
        tpsJava: [],
        officialTps: [],
        officialP99: [],
        oursOverOfficial: [],
        rawleanOverRaw: [],
        publishOverOurs: [],
        publishP99OverOurs: [],
      };
      if (ours && base) {
        rr.tps.push(ours.tps / base.tps);
        rr.p99.push(ours.p99 / base.p99);
      }
      if (ours && java) rr.tpsJava.push(ours.tps / java.tps);
      if (official && base) {
        rr.officialTps.push(official.tps / base.tps);
        rr.officialP99.push(official.p99 / base.p99);
      }
      if (official && ours) rr.oursOverOfficial.push(ours.tps / official.tps);
      if (rawlean && raw) rr.rawleanOverRaw.push(rawlean.tps / raw.tps);
      const pub = per.get('publish')?.rounds[round];
      if (pub && ours) {
        rr.publishOverOurs.push(pub.tps / ours.tps);
        rr.publishP99OverOurs.push(pub.p99 / ours.p99);
      }
      ratioRounds.set(conc, rr);
    }
    for (const col of columns) {
      const { rounds, lat } = per.get(col)!;
      const mean = (f: (x: RoundFigures) => number) =>
        rounds.reduce((acc, x) => acc + f(x), 0) / rounds.length;
      cells.push({
        column: col,
        concurrency: conc,
        rounds,
        tps: spread(rounds.map((x) => x.tps)),
        latency: summarize(lat),
        errors: rounds.reduce((acc, x) => acc + x.errors, 0),
        workerCpuPct: mean((x) => x.workerCpuPct),
        brokerCpuPct: mean((x) => x.window.brokerCpuPct),
        dbCommitsPerSec: mean((x) => x.window.dbCommitsPerSec),
        ...sumCheckBacks(rounds),
        ...sumStatements(rounds),
      });
    }
  }
  for (const [c, w] of workers) if (c !== 'ours') await w.quit();
  await workers.get('ours')!.quit();
  workers.clear();

  // Scaling with producer processes (ours), each at scalingConcurrency.
  const scaling: ScalingRow[] = [];
  for (const k of s.scalingProcesses) {
    const ws = Array.from(
      { length: k },
      (_, i) => new Worker(nodeWorkerSpec(`ours#${i}`, 'ours', TOPICS.ours, GROUPS.ours)),
    );
    await Promise.all(ws.map((w) => w.ready()));
    const tpsRounds: number[] = [];
    const lat: number[] = [];
    let cpu = 0;
    let broker = 0;
    let busy = 0;
    let commits = 0;
    for (let round = 0; round < s.scalingRounds; round++) {
      const close = await openWindow(ds, pid);
      const rs = await Promise.all(
        ws.map((w, i) =>
          w.command<RunResult>(
            `run ${s.scalingConcurrency} ${s.roundMs} ${s.rollbackEvery} ${runId}-ours-p${k}i${i}r${round}`,
            s.roundMs + 120_000,
          ),
        ),
      );
      const win = await close();
      for (const r of rs) {
        record(TOPICS.ours, r);
        lat.push(...r.latencies);
      }
      tpsRounds.push(rs.reduce((acc, r) => acc + (r.committed * 1000) / r.elapsedMs, 0));
      cpu += rs.reduce((acc, r) => acc + (r.cpuMs / r.elapsedMs) * 100, 0) / k;
      broker += win.brokerCpuPct;
      busy += win.machineBusyPct;
      commits += win.dbCommitsPerSec;
    }
    await Promise.all(ws.map((w) => w.quit()));
    const sp = spread(tpsRounds);
    const row = {
      processes: k,
      tps: sp,
      perProcessTps: sp.median / k,
      p99: summarize(lat).p99,
      workerCpuPct: cpu / s.scalingRounds,
      brokerCpuPct: broker / s.scalingRounds,
      machineBusyPct: busy / s.scalingRounds,
      dbCommitsPerSec: commits / s.scalingRounds,
    };
    scaling.push(row);
    log(`scaling: ${k} process(es) x c=${s.scalingConcurrency} done`);
  }

  log('correctness: draining the collectors');
  const drains: DrainReport[] = [];
  for (const [topic, c] of collectors) {
    drains.push(await c.drain(expected.get(topic) ?? [], forbidden.get(topic) ?? [], 120_000));
  }
  const ok = (d: DrainReport) => d.received === d.expected && d.forbidden.length === 0;
  for (const d of drains) {
    log(
      `  ${d.topic}: ${d.received}/${d.expected} committed received, ${d.forbidden.length} rolled-back delivered, ${d.duplicates} duplicates` +
        (d.missing.length ? `; missing e.g. ${d.missing.slice(0, 3).join(', ')}` : ''),
    );
  }

  log(`check-back: ${s.checkBackN} in-doubt transactions`);
  let checkBack: CheckBackReport | undefined;
  let checkBackDrain: DrainReport | undefined;
  try {
    checkBack = await checkBackPhase(ds, TOPICS.ours, runId, s.checkBackN, 90_000);
    checkBackDrain = await collectors
      .get(TOPICS.ours)!
      .drain(checkBack.committedKeys, checkBack.rolledBackKeys, 60_000);
    log(
      `  resolved ${checkBack.resolved}/${checkBack.inDoubt} (${checkBack.wrong} wrong); delivered ${checkBackDrain.received}/${checkBackDrain.expected}, rolled back delivered ${checkBackDrain.forbidden.length}`,
    );
  } catch (err) {
    log(`  check-back phase failed: ${String(err)}`);
  }
  await Promise.all([...collectors.values()].map((c) => c.stop()));

  // The check-back rate with the producer flooded: one instance with the producer's defaults
  // (checkBack.concurrency 4, the batched fence), its pool shared with 4 business writers, every
  // check at once; no broker, so the broker's check interval does not bound it.
  log(`check-back storm: ${s.stormChecks} checks at once, producer flooded`);
  let checkBackStorm: StormResult | undefined;
  try {
    checkBackStorm = await storm(1, 4, {
      checks: s.stormChecks,
      held: 0,
      holdMs: 0,
      pool: 10,
      flood: 4,
      reaskMs: 20,
    });
    log(
      `  ${checkBackStorm.resolved}/${checkBackStorm.checks} resolved (${checkBackStorm.wrong} wrong), ${fmt(checkBackStorm.resolvedPerSec, 0)}/s`,
    );
  } catch (err) {
    log(`  check-back storm failed: ${String(err)}`);
  }

  log(`relay and consumer: ${s.relayN} events, ${s.relayRounds} relay rounds`);
  let relay: RelayConsumerReport | undefined;
  try {
    relay = await relayConsumerPhase(ds, TOPICS.normal, runId, s.relayN, s.relayRounds, 120_000, s.official);
    log('  relay and consumer done');
  } catch (err) {
    log(`  relay/consumer phase failed: ${String(err)}`);
  }

  log(`memory: ${s.memoryTx} transactions at c=${s.memoryConcurrency}`);
  const memWorker = new Worker(nodeWorkerSpec('memory', 'ours', TOPICS.ours, GROUPS.ours, ['--expose-gc']));
  await memWorker.ready();
  const mem = await memWorker.command<{
    total: number;
    done: number;
    errors: number;
    elapsedMs: number;
    gcExposed: boolean;
    samples: Array<{ t: number; done: number; rssMb: number; heapUsedMb: number }>;
  }>(`mem ${s.memoryTx} ${s.memoryConcurrency} ${runId}-mem`, 3_600_000);
  await memWorker.quit();
  const warm = mem.samples.filter((x) => x.done >= mem.total * 0.1);
  const q = Math.max(1, Math.floor(warm.length / 5));
  const avg = (xs: typeof warm, f: (x: (typeof warm)[number]) => number) =>
    xs.reduce((a, x) => a + f(x), 0) / Math.max(1, xs.length);
  const heapFirst = avg(warm.slice(0, q), (x) => x.heapUsedMb);
  const heapLast = avg(warm.slice(-q), (x) => x.heapUsedMb);
  const rssFirst = avg(warm.slice(0, q), (x) => x.rssMb);
  const rssLast = avg(warm.slice(-q), (x) => x.rssMb);
  const heapSlopePer10k = slope(warm.map((x) => [x.done / 10_000, x.heapUsedMb] as const));
  const memory = {
    transactions: mem.done,
    errors: mem.errors,
    txPerSec: (mem.done * 1000) / mem.elapsedMs,
    gcBeforeSample: mem.gcExposed,
    heapFirstMb: heapFirst,
    heapLastMb: heapLast,
    rssFirstMb: rssFirst,
    rssLastMb: rssLast,
    heapSlopeMbPer10kTx: heapSlopePer10k,
    // Flat: the post-GC heap of the last fifth within 10% (or 3 MiB) of the first fifth, after warm-up.
    flat: heapLast <= Math.max(heapFirst * 1.1, heapFirst + 3),
    samples: mem.samples,
  };
  log(`  memory done: ${memory.flat ? 'flat' : 'GROWING'}`);

  const profile = s.profile ? summarizeProfiles(profDir, ROOT) : undefined;
  await ds.destroy();

  const correct =
    drains.every(ok) &&
    (checkBack === undefined || (checkBack.wrong === 0 && checkBack.unresolved === 0)) &&
    (checkBackDrain === undefined || ok(checkBackDrain)) &&
    (checkBackStorm === undefined ||
      (checkBackStorm.wrong === 0 && checkBackStorm.resolved === checkBackStorm.checks));
  const report = {
    runId,
    mode: s.mode,
    startedAt,
    finishedAt: new Date().toISOString(),
    machine,
    loadAverageAtEnd: loadAverage(),
    brokerPid: pid,
    brokerCpuMsAtEnd: processCpuMs(pid),
    settings: { ...s, poolSize: POOL_SIZE, database: BENCH_DB, endpoints: ENDPOINTS, javaSkipped },
    correct,
    correctness: { drains, checkBackDrain },
    cells: cells.map((c) => ({ ...c })),
    ratios: [...ratioRounds].map(([concurrency, r]) => ({
      concurrency,
      oursOverBaselineTps: spread(r.tps),
      oursOverBaselineP99: spread(r.p99),
      oursOverJavaTps: spread(r.tpsJava),
      ...(r.officialTps.length
        ? {
            officialOverBaselineTps: spread(r.officialTps),
            officialOverBaselineP99: spread(r.officialP99),
            oursOverOfficialTps: spread(r.oursOverOfficial),
            rawleanOverRawTps: spread(r.rawleanOverRaw),
          }
        : {}),
      ...(r.publishOverOurs.length
        ? {
            publishOverOursTps: spread(r.publishOverOurs),
            publishOverOursP99: spread(r.publishP99OverOurs),
          }
        : {}),
    })),
    scaling,
    checkBack: checkBack && { ...checkBack, committedKeys: undefined, rolledBackKeys: undefined },
    checkBackStorm,
    relay,
    memory,
    profile,
  };
  if (!correct) {
    // No figures at all from a run that delivered a rolled-back transaction or lost a committed
    // one: only what went wrong, and latest.* keeps the last correct run.
    const failure = {
      runId,
      mode: s.mode,
      startedAt,
      finishedAt: report.finishedAt,
      machine: report.machine,
      correct,
      correctness: report.correctness,
      checkBack: checkBack && {
        inDoubt: checkBack.inDoubt,
        resolved: checkBack.resolved,
        wrong: checkBack.wrong,
        unresolved: checkBack.unresolved,
      },
      checkBackStorm: checkBackStorm && {
        checks: checkBackStorm.checks,
        resolved: checkBackStorm.resolved,
        wrong: checkBackStorm.wrong,
      },
    };
    writeFileSync(path.join(RESULTS, `${runId}.json`), JSON.stringify(failure, null, 2) + '\n');
    writeFileSync(path.join(RESULTS, `${runId}.md`), renderFailure(report));
    process.stderr.write(
      `\nCORRECTNESS CHECK FAILED: figures withheld (details in bench/results/${runId}.{md,json})\n`,
    );
    process.exit(1);
  }
  const markdown = renderMarkdown(report, columns, s);
  const svg = renderSvg(cells, columns, s, report.machine, runId);
  writeFileSync(path.join(RESULTS, `${runId}.json`), JSON.stringify(report, null, 2) + '\n');
  writeFileSync(path.join(RESULTS, `${runId}.md`), markdown);
  writeFileSync(path.join(RESULTS, `${runId}.svg`), svg);
  // latest.* is the newest run on MySQL/MariaDB, latest-postgres.* the newest on PostgreSQL.
  const latest = BENCH_DATABASE === 'postgres' ? 'latest-postgres' : 'latest';
  for (const ext of ['json', 'md', 'svg'])
    copyFileSync(path.join(RESULTS, `${runId}.${ext}`), path.join(RESULTS, `${latest}.${ext}`));
  process.stdout.write(markdown);
  log(`wrote bench/results/${runId}.{md,json,svg} (and ${latest}.*)`);
  process.exit(0);
}

type Report = {
  runId: string;
  mode: string;
  startedAt: string;
  machine: string;
  loadAverageAtEnd: string;
  correct: boolean;
  correctness: { drains: DrainReport[]; checkBackDrain: DrainReport | undefined };
  cells: CellFigures[];
  ratios: Array<{
    concurrency: number;
    oursOverBaselineTps: Spread;
    oursOverBaselineP99: Spread;
    oursOverJavaTps: Spread;
    officialOverBaselineTps?: Spread;
    officialOverBaselineP99?: Spread;
    oursOverOfficialTps?: Spread;
    rawleanOverRawTps?: Spread;
    publishOverOursTps?: Spread;
    publishOverOursP99?: Spread;
  }>;
  scaling: ScalingRow[];
  checkBack:
    (Omit<CheckBackReport, 'committedKeys' | 'rolledBackKeys'> & Record<string, unknown>) | undefined;
  checkBackStorm: StormResult | undefined;
  relay: RelayConsumerReport | undefined;
  memory: {
    transactions: number;
    txPerSec: number;
    heapFirstMb: number;
    heapLastMb: number;
    rssFirstMb: number;
    rssLastMb: number;
    heapSlopeMbPer10kTx: number;
    flat: boolean;
    gcBeforeSample: boolean;
  };
  profile: string | undefined;
};

function drainText(d: DrainReport): string {
  return `${d.topic} ${d.received}/${d.expected} received, ${d.forbidden.length} rolled-back delivered`;
}

/** The report of a run whose correctness check failed: what went wrong, and no figures. */
function renderFailure(r: Report): string {
  const out: string[] = [`## Bench ${r.runId} (${r.mode}): CORRECTNESS FAILED, no figures`, ''];
  out.push(`Machine: ${r.machine}. Started ${r.startedAt}.`, '');
  const drains = [
    ...r.correctness.drains,
    ...(r.correctness.checkBackDrain ? [r.correctness.checkBackDrain] : []),
  ];
  for (const [i, d] of drains.entries()) {
    const what = i < r.correctness.drains.length ? 'measured transactions' : 'check-back phase';
    out.push(`- ${what}: ${drainText(d)}`);
    if (d.missing.length)
      out.push(`  - committed, never received (first ${d.missing.length}): ${d.missing.join(', ')}`);
    if (d.forbidden.length)
      out.push(`  - rolled back, delivered (first ${d.forbidden.length}): ${d.forbidden.join(', ')}`);
  }
  if (r.checkBack) {
    out.push(
      `- check-back phase: ${r.checkBack.resolved}/${r.checkBack.inDoubt} resolved, ${r.checkBack.wrong} wrong, ${r.checkBack.unresolved} unresolved`,
    );
  }
  if (r.checkBackStorm) {
    const st = r.checkBackStorm;
    out.push(`- check-back storm: ${st.resolved}/${st.checks} resolved, ${st.wrong} wrong`);
  }
  out.push('');
  return out.join('\n');
}

/** Per column: statements per attempted transaction by first word, e.g. "ours 5.04 = INSERT 3.00, ...". */
function statementBreakdown(cells: CellFigures[]): string[] {
  const columns = [...new Set(cells.map((c) => c.column))];
  return columns.flatMap((col) => {
    const mine = cells.filter((c) => c.column === col && c.dbStatements);
    if (mine.length === 0) return [];
    const attempted = mine.reduce((acc, c) => acc + c.rounds.reduce((a, x) => a + x.attempted, 0), 0);
    if (attempted === 0) return [];
    const total: Record<string, number> = {};
    for (const c of mine)
      for (const [k, v] of Object.entries(c.dbStatements!)) total[k] = (total[k] ?? 0) + v;
    const all = Object.values(total).reduce((a, b) => a + b, 0);
    const parts = Object.entries(total)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${fmt(v / attempted, 2)}`);
    return [`${col} ${fmt(all / attempted, 2)} (${parts.join(', ')})`];
  });
}

const range = (x: Spread, d = 0) => `${fmt(x.median, d)} (${fmt(x.min, d)}–${fmt(x.max, d)})`;

function renderMarkdown(r: Report, columns: Column[], s: Settings): string {
  const out: string[] = [];
  out.push(`## Bench ${r.runId} (${r.mode})`, '');
  out.push(`Machine: ${r.machine}; load average at the end ${r.loadAverageAtEnd}. Started ${r.startedAt}.`);
  out.push(
    `${s.rounds} interleaved rounds of ${s.roundMs} ms per column and concurrency; pool ${POOL_SIZE} connections per column;` +
      ` 1 in ${s.rollbackEvery} transactions rolled back on purpose (not counted). tx/s: median (min–max) of the rounds; latencies over all rounds, ms.`,
    '',
  );
  out.push(
    `Correctness: ${r.correct ? 'OK' : 'FAILED'} — ` + r.correctness.drains.map(drainText).join('; '),
    '',
  );
  out.push(
    markdownTable(
      [
        'column',
        'conc',
        'tx/s',
        'p50',
        'p95',
        'p99',
        'worker CPU %',
        'broker CPU %',
        'DB commits/s',
        'DB stmts/tx',
        'check-backs C/R/U',
        'errors',
      ],
      r.cells.map((c) => [
        c.column,
        String(c.concurrency),
        range(c.tps),
        fmt(c.latency.p50),
        fmt(c.latency.p95),
        fmt(c.latency.p99),
        fmt(c.workerCpuPct, 0),
        fmt(c.brokerCpuPct, 0),
        fmt(c.dbCommitsPerSec, 0),
        c.dbStatementsPerTx !== undefined ? fmt(c.dbStatementsPerTx, 2) : '-',
        c.checkBacks ? checkBackText(c.checkBacks) : '-',
        String(c.errors),
      ]),
    ),
    '',
  );
  const breakdown = statementBreakdown(r.cells);
  if (breakdown.length) {
    out.push(
      `Database statements (one round trip each) per attempted transaction, counted on the workers’ ${BENCH_DATABASE === 'postgres' ? 'pg' : 'mysql2'} connections, all concurrencies: ` +
        breakdown.join('; ') +
        '.',
      '',
    );
  }
  out.push('Ratios per round (same round, adjacent in time), median (min–max):', '');
  out.push(
    markdownTable(
      ['conc', 'ours/baseline tx/s', 'ours/baseline p99', 'ours/java tx/s', 'target'],
      r.ratios.map((x) => [
        String(x.concurrency),
        range(x.oursOverBaselineTps, 2),
        range(x.oursOverBaselineP99, 2),
        columns.includes('java') ? range(x.oursOverJavaTps, 2) : '-',
        x.concurrency === 64 ? targetText(x, columns.includes('java')) : '',
      ]),
    ),
    '',
  );
  if (r.ratios.some((x) => x.oursOverOfficialTps)) {
    out.push(
      "The transports: `ours` runs on the default, `transport: 'lean'` (src/broker/lean); `official` is `ours` with `transport: 'official'` (rocketmq-client-nodejs for every call); `rawlean` is `raw` over the lean transport. Ratios per round, median (min–max):",
      '',
    );
    out.push(
      markdownTable(
        ['conc', 'official/baseline tx/s', 'official/baseline p99', 'ours/official tx/s', 'rawlean/raw tx/s'],
        r.ratios.map((x) => [
          String(x.concurrency),
          x.officialOverBaselineTps ? range(x.officialOverBaselineTps, 2) : '-',
          x.officialOverBaselineP99 ? range(x.officialOverBaselineP99, 2) : '-',
          x.oursOverOfficialTps ? range(x.oursOverOfficialTps, 2) : '-',
          x.rawleanOverRawTps ? range(x.rawleanOverRawTps, 2) : '-',
        ]),
      ),
      '',
    );
  }
  if (r.ratios.some((x) => x.publishOverOursTps)) {
    out.push(
      "`publish` (inside the caller's `dataSource.transaction`, awaiting `outcome`) next to `ours` (`transact`); statements per transaction in the table above. Ratios per round, median (min–max):",
      '',
      markdownTable(
        ['conc', 'publish/ours tx/s', 'publish/ours p99'],
        r.ratios.map((x) => [
          String(x.concurrency),
          x.publishOverOursTps ? range(x.publishOverOursTps, 2) : '-',
          x.publishOverOursP99 ? range(x.publishOverOursP99, 2) : '-',
        ]),
      ),
      '',
    );
  }
  out.push(`Scaling with producer processes (ours, c=${s.scalingConcurrency} each):`, '');
  out.push(
    markdownTable(
      [
        'processes',
        'total tx/s',
        'per process',
        'p99',
        'worker CPU %',
        'broker CPU %',
        'machine busy %',
        'DB commits/s',
      ],
      r.scaling.map((x) => [
        String(x.processes),
        range(x.tps),
        fmt(x.perProcessTps, 0),
        fmt(x.p99),
        fmt(x.workerCpuPct, 0),
        fmt(x.brokerCpuPct, 0),
        fmt(x.machineBusyPct, 0),
        fmt(x.dbCommitsPerSec, 0),
      ]),
    ),
    '',
  );
  if (r.checkBack) {
    const c = r.checkBack;
    out.push(
      `Check-back: ${c.inDoubt} in-doubt transactions (EndTransaction dropped; ${c.expectedCommit} committed locally, ${c.expectedRollback} never reached the database):` +
        ` ${c.resolved} resolved (${c.wrong} wrong) in ${fmt(c.elapsedMs / 1000)} s = ${fmt(c.resolvedPerSec)} resolved/s;` +
        ` ${fmt(c.firstCheckShare * 100)}% answered on the first check that reached the producer; ${c.checkBacksAnswered} check-backs,` +
        ` ${c.unknownAnswers} UNKNOWN; time to resolution p50 ${fmt(c.timeToResolveMs.p50, 0)} ms, p99 ${fmt(c.timeToResolveMs.p99, 0)} ms` +
        ` (bounded by the broker's transactionTimeOut and check interval).`,
      '',
    );
  }
  if (r.checkBackStorm) {
    const st = r.checkBackStorm;
    out.push(
      `Check-back with the producer flooded (bench/phases/checkBackStorm.ts; no broker): ${st.checks} in-doubt transactions checked at once on one instance with the producer's defaults` +
        ` (checkBack.concurrency ${st.concurrency}, the batched fence), its pool of ${st.poolPerInstance} shared with 4 business writers: ${st.resolved} resolved (${st.wrong} wrong)` +
        ` at **${fmt(st.resolvedPerSec, 0)} resolved/s** (target 2,000: ${st.resolvedPerSec >= 2000 && st.wrong === 0 && st.resolved === st.checks ? 'yes' : 'no'});` +
        ` ${st.asks} checks sent (at most ${st.maxAsks} per transaction), check p99 ${fmt(st.checkMsP99, 0)} ms, ${st.lockTimeouts} lock timeouts, ${st.shed} shed;` +
        ` business ${fmt(st.businessTxPerSecBefore, 0)} tx/s before, ${fmt(st.businessTxPerSecDuring, 0)} during.`,
      '',
    );
  }
  if (r.relay) {
    const x = r.relay;
    const med = (runs: readonly TimedRun[], f: (t: TimedRun) => number): number => spread(runs.map(f)).median;
    const rates = (runs: readonly TimedRun[]): string => runs.map((t) => fmt(t.eventsPerSec, 0)).join(', ');
    const ratio = (sp: Spread): string => `${fmt(sp.median, 2)}x (${fmt(sp.min, 2)}–${fmt(sp.max, 2)})`;
    const cpu = (runs: readonly TimedRun[]): string =>
      [
        med(runs, (t) => t.cpuUsPerEvent),
        med(runs, (t) => t.brokerUsPerEvent),
        med(runs, (t) => t.machineUsPerEvent),
      ]
        .map((v) => fmt(v, 0))
        .join(' / ');
    out.push(
      `Relay: ${x.rounds} interleaved rounds of ${x.events} events each (columns shuffled per round). OutboxRelay (batch ${x.batchSize}) draining NEW outbox rows` +
        ` ${rates(x.relay)} events/s vs raw one-by-one official sends ${rates(x.rawSend)} events/s (${x.rawSendConcurrency} in flight):` +
        ` ${ratio(x.relayOverRawSend)} per round` +
        (x.relayOfficial && x.relayOfficialOverRawSend
          ? `; the relay with transport 'official' ${rates(x.relayOfficial)} events/s: ${ratio(x.relayOfficialOverRawSend)}.`
          : '.') +
        ` CPU µs per event, median (this process / broker / machine): relay ${cpu(x.relay)}, raw sends ${cpu(x.rawSend)}.` +
        ` Consumer: IdempotentConsumer (concurrency ${x.idempotentConsumer.concurrency}) ${fmt(x.idempotentConsumer.eventsPerSec, 0)} events/s vs raw SimpleConsumer` +
        ` ${fmt(x.rawConsumer.eventsPerSec, 0)} events/s: ${fmt(x.idempotentOverRaw, 2)}x.`,
      '',
    );
  }
  const m = r.memory;
  out.push(
    `Memory (ours, ${m.transactions} transactions at ${fmt(m.txPerSec, 0)} tx/s, sampled every second${m.gcBeforeSample ? ' after a GC' : ''}):` +
      ` heap ${fmt(m.heapFirstMb)} -> ${fmt(m.heapLastMb)} MiB, RSS ${fmt(m.rssFirstMb)} -> ${fmt(m.rssLastMb)} MiB,` +
      ` heap slope ${fmt(m.heapSlopeMbPer10kTx, 2)} MiB per 10k tx: ${m.flat ? 'flat' : 'growing'}.`,
    '',
  );
  if (r.profile) out.push('CPU profile (top self time):', '', '```', r.profile, '```', '');
  return out.join('\n');
}

function renderSvg(
  cells: CellFigures[],
  columns: Column[],
  s: Settings,
  machine: string,
  runId: string,
): string {
  const series = (f: (c: CellFigures) => number) =>
    columns.map((col) => ({
      name: col,
      color: COLORS[col],
      points: s.concurrency.map((conc, i) => {
        const c = cells.find((x) => x.column === col && x.concurrency === conc);
        return [i, c ? f(c) : NaN] as const;
      }),
    }));
  return svgPlot(
    [
      { title: 'Throughput (median of rounds)', yLabel: 'tx/s', series: series((c) => c.tps.median) },
      { title: 'p99 latency', yLabel: 'ms', series: series((c) => c.latency.p99) },
    ],
    s.concurrency.map(String),
    'concurrency',
    `${runId}: ${machine}`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
