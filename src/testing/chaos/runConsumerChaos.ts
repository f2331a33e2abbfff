import type { DataSource } from 'typeorm';
import { IdempotentConsumer } from '../../consumer/IdempotentConsumer';
import { ACKED_KINDS } from '../../consumer/outcome';
import { TransactionalProducer } from '../../producer/TransactionalProducer';
import { requireResourceName } from '../../util/clientOptions';
import { optionalInt, rejectUnknownKeys, requireObject } from '../../util/validate';
import { uuidv7 } from '../../util/uuidv7';
import { entryPoint, forkChild, kill, sleep, type Child } from './child';
import type { ConsumerChildConfig } from './consumerChild';
import {
  resolveRunnerBase,
  runKillLoop,
  RUNNER_BASE_KEYS,
  textTable,
  type ChaosRunnerOptions,
  type RunnerBase,
} from './killLoop';
import { CONSUMER_WINDOWS, type ConsumerWindow } from './protocol';
import { resolveWindows, schedule } from './schedule';
import { CONSUMER_TARGET_FUNCTIONS, loadTarget, type ChaosConsumerTarget } from './target';

/** ChaosRunnerOptions (module: see ChaosConsumerTarget; parallel: consumer processes) and: */
export interface ConsumerChaosOptions extends ChaosRunnerOptions {
  /** A TRANSACTION topic: the runner publishes your events there with a TransactionalProducer. */
  topic: string;
  /** Consumer group of the run. Default a fresh one per run (rmqtx_chaos_c_<id>), so runs do not mix. */
  consumerGroup?: string;
  /** Windows to kill in (default all three, in turn). */
  windows?: readonly ConsumerWindow[];
  /** Events published before each round's process is forked. Default 5. */
  eventsPerRound?: number;
}

export interface ConsumerChaosWindowReport {
  window: ConsumerWindow;
  kills: number;
  /** Kills that happened inside the window (the rest: the window timed out first). */
  reached: number;
}

export interface ConsumerChaosReport {
  ok: boolean;
  seed: number;
  consumerGroup: string;
  rounds: number;
  windows: ConsumerChaosWindowReport[];
  /** Events the runner published (each committed, so each must be applied once). */
  published: number;
  /** Events whose effect is in your database exactly once. */
  appliedOnce: number;
  /** Events whose effect never appeared. */
  lost: number;
  /** Events whose effect appeared more than once. */
  appliedTwice: number;
  /** Deliveries the survivor consumer recognised as already processed (at-least-once at work). */
  survivorDuplicates: number;
  /** Messages a killed process held when it died in a named window (in-handler, before-ack). */
  heldAtKill: number;
  /**
   * Of those, the ones no later process and not the survivor settled before the settle timeout:
   * a second application of those would not show in the counts. 0 in a conclusive run; the
   * broker's revive can drop a redelivery (RocketMQ 5.3.3 did, for 1 of 13 in one CI run).
   */
  notRedelivered: number;
  /** Why ok is false. */
  failures: string[];
  settleMs: number;
  durationMs: number;
}

/** IdempotentConsumer's default invisibleDurationMs. */
const DEFAULT_INVISIBLE_MS = 30_000;
const REDELIVERY_MARGIN_MS = 5000;
const EFFECTS_TIMEOUT_MS = 60_000;

async function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `${what} did not answer within ${ms} ms (is the DataSource's pool exhausted by the consumer's handlers?)`,
              ),
            ),
          ms,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

const KNOWN = [...RUNNER_BASE_KEYS, 'consumerGroup', 'windows', 'eventsPerRound'];

interface Resolved extends RunnerBase {
  consumerGroup: string;
  windows: ConsumerWindow[];
  eventsPerRound: number;
}

export function resolveConsumerChaosOptions(input: unknown): Resolved {
  const o = requireObject('options', input);
  rejectUnknownKeys('options', o, KNOWN);
  return {
    ...resolveRunnerBase(o),
    consumerGroup:
      o.consumerGroup === undefined
        ? `rmqtx_chaos_c_${uuidv7().slice(-12)}`
        : requireResourceName('consumerGroup', o.consumerGroup),
    windows: resolveWindows('windows', o.windows, CONSUMER_WINDOWS),
    eventsPerRound: optionalInt('eventsPerRound', o.eventsPerRound, 5, 1, 1000),
  };
}

/**
 * The crash-window runner for consumers: publishes your events, forks processes that run your
 * IdempotentConsumer (your handlers and options) and SIGKILLs each at random or inside a named
 * window (inside your handler before the COMMIT; after the COMMIT before the ack); then a
 * survivor consumer of the same group finishes, and your `effects()` counts each event's effect
 * in your database. ok: every published event applied exactly once (none lost, none twice).
 */
export async function runConsumerChaos(options: ConsumerChaosOptions): Promise<ConsumerChaosReport> {
  const o = resolveConsumerChaosOptions(options);
  const started = Date.now();
  const target = loadTarget<ChaosConsumerTarget>(o.module, CONSUMER_TARGET_FUNCTIONS);
  const plan = schedule(o.rounds, o.windows, o.seed, o.randomDelayMs);
  const tag = `c${uuidv7().replace(/-/g, '').slice(-12)}`;
  o.log(
    `[chaos] consumer group ${o.consumerGroup}, topic ${o.topic} (tag ${tag}), ${o.rounds} kills (${o.windows.join(', ')}), seed ${o.seed}`,
  );
  const dataSource: DataSource = await target.dataSource();
  const producer = new TransactionalProducer({
    endpoints: o.endpoints,
    ...(o.namespace ? { namespace: o.namespace } : {}),
    dataSource,
    producerGroup: `${o.consumerGroup}_p`,
    topics: [o.topic],
    startTimeoutMs: 30_000,
  });
  const eventIds: string[] = [];
  let sequence = 0;
  const publish = async (count: number): Promise<void> => {
    for (let i = 0; i < count; i++) {
      const r = await producer.transact({ ...target.event(sequence++, o.topic), tag }, async () => undefined);
      eventIds.push(...r.eventIds);
    }
  };
  const live = new Set<Child>();
  const heldAtKill = new Set<string>();
  /** Messages (by id) acked by a forked process or the survivor. */
  const settledAnywhere = new Set<string>();
  let survivor: IdempotentConsumer | undefined;
  try {
    await target.prepare?.(dataSource);
    await producer.start();
    const counts = await runKillLoop({
      plan,
      parallel: o.parallel,
      windowTimeoutMs: o.windowTimeoutMs,
      what: 'consumer',
      live,
      log: o.log,
      fork: async (r) => {
        await publish(o.eventsPerRound);
        const config: ConsumerChildConfig = {
          module: o.module,
          window: r.window,
          endpoints: o.endpoints,
          namespace: o.namespace,
          topic: o.topic,
          tag,
          consumerGroup: o.consumerGroup,
        };
        return forkChild(entryPoint('consumerChild'), o.module, config, 600_000, (line) => {
          if (line.t === 'settled') settledAnywhere.add(line.id);
        });
      },
      // A named window's line carries the message the process held: a later process must settle it.
      killed: (r, child, reached) => {
        if (reached && r.window !== 'random')
          void child.reached.then((line) => line.id !== undefined && heldAtKill.add(line.id));
      },
      progress: () => `${eventIds.length} events published`,
    });
    const killedAt = Date.now();
    o.log(`[chaos] all ${o.rounds} kills done; a survivor consumer finishes the ${eventIds.length} events`);
    const userOptions = target.consumerOptions();
    survivor = new IdempotentConsumer({
      ...userOptions,
      onOutcome: (outcome) => {
        if (ACKED_KINDS.includes(outcome.kind)) settledAnywhere.add(outcome.messageId);
        userOptions.onOutcome?.(outcome);
      },
      endpoints: o.endpoints,
      ...(o.namespace ? { namespace: o.namespace } : {}),
      dataSource,
      consumerGroup: o.consumerGroup,
      subscriptions: [{ topic: o.topic, tag }],
    });
    await survivor.start();
    // Bounded: a pool exhausted by your handlers (each holding a connection and waiting for
    // another) would otherwise hang the run silently.
    const countEffects = () => bounded(target.effects(dataSource, eventIds), EFFECTS_TIMEOUT_MS, 'effects()');
    let effects = await countEffects();
    const applied = () => eventIds.filter((id) => (effects.get(id) ?? 0) >= 1).length;
    let best = applied();
    let progressAt = Date.now();
    let reportAt = Date.now();
    while (best < eventIds.length) {
      if (Date.now() - progressAt > o.settleTimeoutMs) {
        o.log(
          `[chaos] ${eventIds.length - best} events still not applied after ${o.settleTimeoutMs} ms without progress`,
        );
        break;
      }
      if (Date.now() - reportAt > 10_000) {
        reportAt = Date.now();
        o.log(`[chaos] settling: ${eventIds.length - best} of ${eventIds.length} events not applied yet`);
      }
      await sleep(1000);
      effects = await countEffects();
      const now = applied();
      if (now > best) progressAt = Date.now();
      best = Math.max(best, now);
    }
    // Messages a killed process had received come back once their invisible duration ends (the
    // broker may take longer): keep the survivor running until every message a process held when
    // it died in a named window was settled again (by a later process or the survivor), and at
    // least that duration, so a second application would show in the final count.
    const invisibleMs = userOptions.invisibleDurationMs ?? DEFAULT_INVISIBLE_MS;
    const notBack = () => [...heldAtKill].filter((id) => !settledAnywhere.has(id)).length;
    let waiting = notBack();
    progressAt = Date.now();
    while (Date.now() - killedAt < invisibleMs + REDELIVERY_MARGIN_MS || waiting > 0) {
      if (waiting > 0 && Date.now() - progressAt > o.settleTimeoutMs) {
        o.log(
          `[chaos] ${waiting} messages held by killed processes not acked again after ${o.settleTimeoutMs} ms`,
        );
        break;
      }
      await sleep(500);
      const now = notBack();
      if (now < waiting) progressAt = Date.now();
      waiting = now;
    }
    const settleMs = Date.now() - killedAt;
    await survivor.shutdown();
    effects = await countEffects();
    const lost = eventIds.filter((id) => (effects.get(id) ?? 0) === 0);
    const twice = eventIds.filter((id) => (effects.get(id) ?? 0) > 1);
    const failures: string[] = [];
    if (lost.length > 0)
      failures.push(`${lost.length} events never applied (e.g. ${lost.slice(0, 3).join(', ')})`);
    if (twice.length > 0)
      failures.push(`${twice.length} events applied more than once (e.g. ${twice.slice(0, 3).join(', ')})`);
    return {
      ok: failures.length === 0,
      seed: o.seed,
      consumerGroup: o.consumerGroup,
      rounds: o.rounds,
      windows: o.windows.map((w) => ({
        window: w,
        kills: counts.get(w)?.kills ?? 0,
        reached: counts.get(w)?.reached ?? 0,
      })),
      published: eventIds.length,
      appliedOnce: eventIds.length - lost.length - twice.length,
      lost: lost.length,
      appliedTwice: twice.length,
      survivorDuplicates: survivor.stats.duplicates,
      heldAtKill: heldAtKill.size,
      notRedelivered: waiting,
      failures,
      settleMs,
      durationMs: Date.now() - started,
    };
  } finally {
    await Promise.all([...live].map((c) => kill(c)));
    await survivor?.shutdown().catch(() => undefined);
    await producer.shutdown();
    await dataSource.destroy().catch(() => undefined);
  }
}

/** The report as text: kills per window, then the effect counts and the verdict. */
export function formatConsumerChaosReport(report: ConsumerChaosReport): string {
  const out = textTable(
    ['window', 'kills', 'reached'],
    [
      ...report.windows.map((w) => [w.window, w.kills, w.reached]),
      ['total', report.rounds, report.windows.reduce((n, w) => n + w.reached, 0)],
    ],
  );
  out.push(
    '',
    `events published ${report.published}, applied once ${report.appliedOnce}, lost ${report.lost}, ` +
      `applied more than once ${report.appliedTwice}; duplicate deliveries the survivor skipped ${report.survivorDuplicates}` +
      (report.notRedelivered > 0
        ? `; ${report.notRedelivered} of ${report.heldAtKill} messages held by killed processes never came back (inconclusive for those)`
        : ''),
    `seed ${report.seed}, group ${report.consumerGroup}, settled in ${(report.settleMs / 1000).toFixed(1)} s, ` +
      `total ${(report.durationMs / 1000).toFixed(1)} s`,
    report.ok ? 'OK: every event applied exactly once' : `FAILED: ${report.failures.join('; ')}`,
  );
  return out.join('\n');
}
