import type { DataSource } from 'typeorm';
import { RawCollector } from '../../broker/rawCollector';
import type { CheckBackOutcome } from '../../checkback/CheckBackDispatcher';
import { EVENT_ID_PROPERTY, TX_ID_PROPERTY, TX_ORIGIN_PROPERTY } from '../../checkback/resolution';
import { TransactionalProducer } from '../../producer/TransactionalProducer';
import { committedEventsOf, txStatusesOf } from '../../store/typeorm/chaosQueries';
import { requireResourceName } from '../../util/clientOptions';
import { optionalInt, rejectUnknownKeys, requireObject } from '../../util/validate';
import { uuidv7 } from '../../util/uuidv7';
import { entryPoint, forkChild, kill, sleep, type Child } from './child';
import {
  resolveRunnerBase,
  runKillLoop,
  RUNNER_BASE_KEYS,
  textTable,
  type ChaosRunnerOptions,
  type RunnerBase,
} from './killLoop';
import type { ProducerChildConfig } from './producerChild';
import { PRODUCER_WINDOWS, type ProducerWindow } from './protocol';
import { resolveWindows, schedule } from './schedule';
import { tallyChaos, type ChaosWindowReport } from './tally';
import { loadTarget, type ChaosProducerTarget } from './target';

/** ChaosRunnerOptions (module: see ChaosProducerTarget) and: */
export interface ProducerChaosOptions extends ChaosRunnerOptions {
  /** The TRANSACTION topic your transaction publishes to (the producers declare it). */
  topic: string;
  /** Producer group of the run. Default a fresh one per run (rmqtx_chaos_<id>), so runs do not mix. */
  producerGroup?: string;
  /** Windows to kill in (default all five, in turn). */
  windows?: readonly ProducerWindow[];
  /** Business transactions in flight per process. Default 2. */
  concurrency?: number;
  /** Wait at least this long after the last kill (the broker's check-back horizon: in-doubt halves may still be checked). Default 20000. */
  checkHorizonMs?: number;
  /**
   * The survivor's discard recovery horizon (see DiscardRecoveryOptions.horizonMs). Default
   * checkHorizonMs + 5000: a half message the broker discarded (its checks went to killed or
   * frozen processes) is republished within the run, not after the producer's default 20 min.
   */
  recoveryHorizonMs?: number;
}

export type { ChaosWindowReport } from './tally';

export interface ProducerChaosReport {
  ok: boolean;
  seed: number;
  producerGroup: string;
  rounds: number;
  windows: ChaosWindowReport[];
  total: ChaosWindowReport;
  /** Check-backs the survivor answered, by how it decided. */
  survivorCheckBacks: Record<string, number>;
  /** Why ok is false. */
  failures: string[];
  settleMs: number;
  durationMs: number;
}

const KNOWN = [
  ...RUNNER_BASE_KEYS,
  'producerGroup',
  'windows',
  'concurrency',
  'checkHorizonMs',
  'recoveryHorizonMs',
];

interface Resolved extends RunnerBase {
  producerGroup: string;
  windows: ProducerWindow[];
  concurrency: number;
  checkHorizonMs: number;
  recoveryHorizonMs: number;
}

/** Default recovery horizon beyond the check horizon (a republish during the broker's checks is a duplicate). */
const RECOVERY_MARGIN_MS = 5000;

export function resolveProducerChaosOptions(input: unknown): Resolved {
  const o = requireObject('options', input);
  rejectUnknownKeys('options', o, KNOWN);
  const checkHorizonMs = optionalInt('checkHorizonMs', o.checkHorizonMs, 20_000, 0, 86_400_000);
  return {
    ...resolveRunnerBase(o),
    producerGroup:
      o.producerGroup === undefined
        ? `rmqtx_chaos_${uuidv7().slice(-12)}`
        : requireResourceName('producerGroup', o.producerGroup),
    windows: resolveWindows('windows', o.windows, PRODUCER_WINDOWS),
    concurrency: optionalInt('concurrency', o.concurrency, 2, 1, 64),
    checkHorizonMs,
    recoveryHorizonMs: optionalInt(
      'recoveryHorizonMs',
      o.recoveryHorizonMs,
      Math.max(1000, checkHorizonMs + RECOVERY_MARGIN_MS),
      1000,
      7 * 86_400_000,
    ),
  };
}

/**
 * The crash-window runner for producers: forks processes that run your business transaction
 * in a loop and SIGKILLs each one at random or inside a named window (after the half message
 * was sent, inside your work, after COMMIT before EndTransaction, while answering a check-back);
 * a survivor producer of the same group answers the broker's check-backs; a raw consumer counts
 * every delivery. Reports, per window, what committed, what was delivered, lost (committed, never
 * delivered), phantom (delivered, never committed) and duplicated. ok: nothing lost, no phantom.
 */
export async function runProducerChaos(options: ProducerChaosOptions): Promise<ProducerChaosReport> {
  const o = resolveProducerChaosOptions(options);
  const started = Date.now();
  const target = loadTarget<ChaosProducerTarget>(o.module, ['dataSource', 'transaction']);
  const plan = schedule(o.rounds, o.windows, o.seed, o.randomDelayMs);
  o.log(
    `[chaos] producer group ${o.producerGroup}, topic ${o.topic}, ${o.rounds} kills (${o.windows.join(', ')}), seed ${o.seed}`,
  );
  const dataSource: DataSource = await target.dataSource();
  const collector = new RawCollector(o.endpoints, `${o.producerGroup}_raw`, [o.topic], o.namespace);
  const outcomes: CheckBackOutcome[] = [];
  const survivor = new TransactionalProducer({
    endpoints: o.endpoints,
    ...(o.namespace ? { namespace: o.namespace } : {}),
    dataSource,
    producerGroup: o.producerGroup,
    topics: [o.topic],
    startTimeoutMs: 30_000,
    checkBack: { onResolved: (outcome) => outcomes.push(outcome) },
    // The broker discards a half message after its last check; checks sent to a killed or frozen
    // process go unanswered, so a committed event can lose its half message. The survivor
    // republishes it (same eventId) once the check horizon has passed, within the run.
    discardRecovery: { horizonMs: o.recoveryHorizonMs, intervalMs: 1000, leaseMs: 5000 },
  });
  const owner = new Map<string, ProducerWindow>();
  const transactions = new Map<ProducerWindow, number>();
  const live = new Set<Child>();
  try {
    await target.prepare?.(dataSource);
    await collector.start();
    await survivor.start();
    const counts = await runKillLoop({
      plan,
      parallel: o.parallel,
      windowTimeoutMs: o.windowTimeoutMs,
      what: 'producer',
      live,
      log: o.log,
      fork: (r) => {
        const config: ProducerChildConfig = {
          module: o.module,
          window: r.window,
          endpoints: o.endpoints,
          namespace: o.namespace,
          topics: [o.topic],
          producerGroup: o.producerGroup,
          concurrency: o.concurrency,
        };
        return forkChild(entryPoint('producerChild'), o.module, config, 600_000);
      },
      killed: (r, child) => {
        transactions.set(r.window, (transactions.get(r.window) ?? 0) + child.txIds.length);
        for (const txId of child.txIds) owner.set(txId, r.window);
      },
      progress: () => `${owner.size} transactions begun`,
    });
    const kills = new Map(
      o.windows.map((w) => [
        w,
        {
          kills: counts.get(w)?.kills ?? 0,
          reached: counts.get(w)?.reached ?? 0,
          transactions: transactions.get(w) ?? 0,
        },
      ]),
    );
    const killedAt = Date.now();
    o.log(
      `[chaos] all ${o.rounds} kills done; waiting for check-backs and delivery (at least ${o.checkHorizonMs} ms)`,
    );
    const delivered = () =>
      new Set(
        collector.received
          .filter((m) => m.properties[TX_ORIGIN_PROPERTY] === o.producerGroup)
          .map((m) => m.properties[EVENT_ID_PROPERTY]),
      );
    let lastMissing = Number.POSITIVE_INFINITY;
    let progressAt = Date.now();
    let reportAt = Date.now();
    for (;;) {
      const committed = await committedEventsOf(dataSource, o.producerGroup);
      const got = delivered();
      const missing = committed.filter((e) => !got.has(e.eventId)).length;
      if (missing < lastMissing) progressAt = Date.now();
      lastMissing = missing;
      if (missing === 0 && Date.now() - killedAt >= o.checkHorizonMs) break;
      if (Date.now() - progressAt > o.settleTimeoutMs) {
        o.log(
          `[chaos] ${missing} committed events still undelivered after ${o.settleTimeoutMs} ms without progress`,
        );
        break;
      }
      if (Date.now() - reportAt > 10_000) {
        reportAt = Date.now();
        o.log(`[chaos] settling: ${missing} of ${committed.length} committed events not delivered yet`);
      }
      await sleep(1000);
    }
    const settleMs = Date.now() - killedAt;
    // A marker after everything: once it arrives, the deliveries before it have too.
    const marker = await survivor.transact(
      { topic: o.topic, body: 'rocketmq-tx chaos marker' },
      async () => undefined,
    );
    const markerId = marker.eventIds[0]!;
    const markerDeadline = Date.now() + 60_000;
    while (!delivered().has(markerId) && Date.now() < markerDeadline) await sleep(200);
    return await summarize(o, dataSource, collector, owner, kills, outcomes, markerId, settleMs, started);
  } finally {
    await Promise.all([...live].map((c) => kill(c)));
    await survivor.shutdown();
    await collector.stop();
    await dataSource.destroy().catch(() => undefined);
  }
}

async function summarize(
  o: Resolved,
  dataSource: DataSource,
  collector: RawCollector,
  owner: Map<string, ProducerWindow>,
  kills: Map<ProducerWindow, { kills: number; reached: number; transactions: number }>,
  outcomes: CheckBackOutcome[],
  markerId: string,
  settleMs: number,
  started: number,
): Promise<ProducerChaosReport> {
  const committed = (await committedEventsOf(dataSource, o.producerGroup)).filter(
    (e) => e.eventId !== markerId,
  );
  const statuses = await txStatusesOf(dataSource, o.producerGroup);
  const received = collector.received.filter(
    (m) =>
      m.properties[TX_ORIGIN_PROPERTY] === o.producerGroup && m.properties[EVENT_ID_PROPERTY] !== markerId,
  );
  const { windows, total, failures } = tallyChaos({
    windows: o.windows,
    kills,
    owner,
    statuses,
    committed,
    received: received.map((m) => ({
      eventId: m.properties[EVENT_ID_PROPERTY] ?? '',
      txId: m.properties[TX_ID_PROPERTY],
    })),
  });
  const survivorCheckBacks: Record<string, number> = {};
  for (const c of outcomes) survivorCheckBacks[c.decidedBy] = (survivorCheckBacks[c.decidedBy] ?? 0) + 1;
  return {
    ok: failures.length === 0,
    seed: o.seed,
    producerGroup: o.producerGroup,
    rounds: o.rounds,
    windows,
    total,
    survivorCheckBacks,
    failures,
    settleMs,
    durationMs: Date.now() - started,
  };
}

/** The report as a text table (one row per window and a total), then the verdict. */
export function formatChaosReport(report: ProducerChaosReport): string {
  const headers = [
    'window',
    'kills',
    'reached',
    'tx',
    'committed tx',
    'committed ev',
    'delivered',
    'lost',
    'phantom',
    'duplicates',
  ];
  const rows = [...report.windows, report.total].map((r) => [
    r.window,
    r.kills,
    r.reached,
    r.transactions,
    r.committedTransactions,
    r.committedEvents,
    r.deliveredEvents,
    r.lost,
    r.phantom,
    r.duplicates,
  ]);
  const out = textTable(headers, rows);
  out.push(
    '',
    `seed ${report.seed}, group ${report.producerGroup}, settled in ${(report.settleMs / 1000).toFixed(1)} s, ` +
      `total ${(report.durationMs / 1000).toFixed(1)} s; survivor check-backs ${JSON.stringify(report.survivorCheckBacks)}`,
    report.ok ? 'OK: nothing lost, nothing phantom' : `FAILED: ${report.failures.join('; ')}`,
  );
  return out.join('\n');
}
