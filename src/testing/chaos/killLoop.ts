import { InvalidOptionError } from '../../errors';
import { requireResourceName, RESOURCE_NAME_RE } from '../../util/clientOptions';
import { optionalInt, requireEndpoints, requireString } from '../../util/validate';
import { kill, sleep, type Child } from './child';
import { resolveDelay, type Round } from './schedule';
import { resolveModulePath } from './target';

/** Kills per window, and how many reached their window before the kill. */
export interface KillCount {
  kills: number;
  reached: number;
}

/** The options both crash-window runners take (runProducerChaos, runConsumerChaos). */
export interface ChaosRunnerOptions {
  /** Path of your module (see ChaosProducerTarget, ChaosConsumerTarget). */
  module: string;
  /** RocketMQ 5 proxy endpoints. */
  endpoints: string;
  namespace?: string;
  /** SIGKILLs in all. Default 50. */
  rounds?: number;
  /** Seed of the schedule (window order, random delays). Default: time-based (printed). */
  seed?: number;
  /** Processes alive at once. Default 2. */
  parallel?: number;
  /** The random kill's delay after the process is ready, [min, max] ms. Default [200, 2500]. */
  randomDelayMs?: readonly [number, number];
  /** Give up waiting for a named window after this long, then kill anyway (counted as not reached). Default 20000. */
  windowTimeoutMs?: number;
  /** Stop waiting (for delivery, or for every effect) after this long without progress. Default 120000. */
  settleTimeoutMs?: number;
  /** Progress lines while it runs. */
  onProgress?: (line: string) => void;
}

/** The options both runners share, resolved. */
export interface RunnerBase {
  module: string;
  endpoints: string;
  namespace: string;
  topic: string;
  rounds: number;
  seed: number;
  parallel: number;
  randomDelayMs: [number, number];
  windowTimeoutMs: number;
  settleTimeoutMs: number;
  log: (line: string) => void;
}

export const RUNNER_BASE_KEYS = [
  'module',
  'endpoints',
  'namespace',
  'topic',
  'rounds',
  'seed',
  'parallel',
  'randomDelayMs',
  'windowTimeoutMs',
  'settleTimeoutMs',
  'onProgress',
] as const;

export function resolveRunnerBase(o: Record<string, unknown>): RunnerBase {
  if (o.onProgress !== undefined && typeof o.onProgress !== 'function') {
    throw new InvalidOptionError('onProgress', o.onProgress, 'a function');
  }
  return {
    module: resolveModulePath('module', o.module),
    endpoints: requireEndpoints(o.endpoints),
    namespace:
      o.namespace === undefined ? '' : requireString('namespace', o.namespace, { pattern: RESOURCE_NAME_RE }),
    topic: requireResourceName('topic', o.topic),
    rounds: optionalInt('rounds', o.rounds, 50, 1, 1_000_000),
    seed: optionalInt('seed', o.seed, Date.now() % 2 ** 31, 0, 2 ** 32 - 1),
    parallel: optionalInt('parallel', o.parallel, 2, 1, 64),
    randomDelayMs: resolveDelay('randomDelayMs', o.randomDelayMs, [200, 2500]),
    windowTimeoutMs: optionalInt('windowTimeoutMs', o.windowTimeoutMs, 20_000, 100, 3_600_000),
    settleTimeoutMs: optionalInt('settleTimeoutMs', o.settleTimeoutMs, 120_000, 1000, 86_400_000),
    log: (o.onProgress as ((line: string) => void) | undefined) ?? (() => undefined),
  };
}

export interface KillLoop<W extends string> {
  plan: readonly Round<W>[];
  parallel: number;
  windowTimeoutMs: number;
  /** 'producer' or 'consumer', for messages. */
  what: string;
  /** Forks the round's process (resolves once it is ready). */
  fork(round: Round<W>): Promise<Child>;
  /** After the kill of a process that was alive until then. */
  killed(round: Round<W>, child: Child, reached: boolean): void;
  /** Extra text for the progress line. */
  progress(): string;
  log(line: string): void;
  /** The processes alive now (the caller kills what is left on failure). */
  live: Set<Child>;
}

/**
 * Runs the schedule, `parallel` processes at a time: fork, wait for the window (or a random
 * delay, or the window timeout), SIGKILL. Resolves with the kills per window.
 */
export async function runKillLoop<W extends string>(loop: KillLoop<W>): Promise<Map<W, KillCount>> {
  const counts = new Map<W, KillCount>();
  for (const r of loop.plan) if (!counts.has(r.window)) counts.set(r.window, { kills: 0, reached: 0 });
  let next = 0;
  let done = 0;
  let lastProgress = Date.now();
  const round = async (r: Round<W>): Promise<void> => {
    const child = await loop.fork(r);
    loop.live.add(child);
    let reached = r.window === 'random';
    if (r.window === 'random') await sleep(r.delayMs);
    else
      reached = await Promise.race([
        child.reached.then(() => true),
        sleep(loop.windowTimeoutMs).then(() => false),
      ]);
    const early = child.process.exitCode !== null;
    await kill(child);
    loop.live.delete(child);
    if (early)
      throw new Error(`a ${loop.what} process exited before its kill: ${child.stderrTail().slice(-1500)}`);
    const c = counts.get(r.window)!;
    c.kills++;
    if (reached) c.reached++;
    loop.killed(r, child, reached);
    done++;
    if (done % 10 === 0 || done === loop.plan.length || Date.now() - lastProgress > 15_000) {
      lastProgress = Date.now();
      const per = [...counts].map(([w, v]) => `${w} ${v.reached}/${v.kills}`).join(', ');
      loop.log(`[chaos] ${done}/${loop.plan.length} kills (reached/killed: ${per}); ${loop.progress()}`);
    }
  };
  const slot = async (): Promise<void> => {
    while (next < loop.plan.length) await round(loop.plan[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(loop.parallel, loop.plan.length) }, slot));
  return counts;
}

/** A text table: first column left-aligned, the others right-aligned. */
export function textTable(headers: readonly string[], rows: ReadonlyArray<readonly unknown[]>): string[] {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells: readonly unknown[]) =>
    cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]!) : String(c).padStart(widths[i]!))).join('  ');
  return [line(headers), ...rows.map(line)];
}
