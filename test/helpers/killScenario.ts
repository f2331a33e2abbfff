/**
 * The producers-only kill scenario (issue 20): instances of one producerGroup on one TRANSACTION
 * topic run transactions in a loop and are SIGKILLed at random; one survivor instance answers
 * check-backs; a raw consumer collects everything. No relay. Reports committed, delivered, lost,
 * phantom and duplicate events, and where the duplicates came from.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';
import * as readline from 'node:readline';
import type { DataSource } from 'typeorm';
import { OutboxRelay, type CheckBackOutcome, type TransactionalProducer } from '../../src';
import { Collector, type Received } from './collector';
import { ensureSchema, openDataSource, sql } from './db';
import { waitFor } from './env';
import { makeProducer } from './producer';
import { seeded } from '../../src/testing/random';

export interface KillScenarioOptions {
  endpoints: string;
  topic: string;
  /** SIGKILLs in all (the last instances standing are killed too). */
  kills: number;
  /** Instances running at once (each killed one is replaced until `kills` is reached). */
  instances?: number;
  /** Transactions in flight per instance. */
  concurrency?: number;
  /** Random pause between kills, ms. */
  killEveryMs?: [number, number];
  /** Discard recovery horizon of every instance and the survivor; 'off' turns it off; undefined: not passed (old code). */
  recoveryHorizonMs?: number | 'off';
  /** Also run an OutboxRelay with this discardHorizonMs beside the survivor (the pre-0.2 way to recover discards). */
  relayHorizonMs?: number;
  /** The broker's check-back horizon (transactionTimeOut + checkMax x interval): how long in-doubt halves may still be checked. */
  brokerHorizonMs: number;
  /** Give up waiting for delivery after this long without progress (fewer missing events). */
  settleTimeoutMs: number;
  seed?: number;
  log?: (line: string) => void;
  /** The producers' confirmBy (instances and survivor); default the producer's default. */
  confirmBy?: 'endTransaction' | 'delivery';
  /** Runs after each SIGKILL (1-based count) while the instances keep running: a fault to inject (a broker killed, restarted). */
  afterKill?: (kills: number) => Promise<void>;
}

export interface KillReport {
  kills: number;
  group: string;
  /** COMMITTED transactions of the group and their events (the database's truth). */
  committedTransactions: number;
  committedEvents: number;
  /** Transactions rolled back (work threw, or fenced by a check-back). */
  rolledBackTransactions: number;
  deliveries: number;
  deliveredEvents: number;
  /** Committed events never delivered. */
  lost: number;
  /** Delivered events whose transaction is not COMMITTED. */
  phantom: number;
  /** Deliveries beyond the first of an event. */
  duplicates: number;
  /** ... of which the broker delivered one half message twice (same messageId). */
  brokerDuplicates: number;
  /** ... of which are a second message for the event (republished by the discard recovery). */
  republishDuplicates: number;
  /** Events the survivor's discard recovery republished (the killed instances' counts died with them). */
  survivorRepublished: number;
  /** Check-backs the survivor answered, by how it decided. */
  survivorCheckBacks: Record<string, number>;
  settleMs: number;
}

const CHILD = path.join(__dirname, 'kill-child.ts');

export interface Instance {
  child: ChildProcess;
  exited: Promise<unknown>;
}

/**
 * Starts one kill-child.ts instance of `group`; resolves once it printed "ready". `onLine` sees
 * every later stdout line (e.g. "checkback ..." with KILL_REPORT_CHECKBACKS=1); `env` adds to its env.
 */
export function startInstance(
  o: Pick<KillScenarioOptions, 'endpoints' | 'topic' | 'concurrency' | 'recoveryHorizonMs' | 'confirmBy'>,
  group: string,
  extra: { env?: Record<string, string>; onLine?: (line: string) => void } = {},
): Promise<Instance> {
  const horizon = o.recoveryHorizonMs;
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', CHILD, o.topic, group], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      TS_NODE_TRANSPILE_ONLY: '1',
      ROCKETMQ_ENDPOINTS: o.endpoints,
      KILL_CONCURRENCY: String(o.concurrency ?? 2),
      ...(horizon !== undefined ? { KILL_RECOVERY_HORIZON_MS: String(horizon) } : {}),
      ...(o.confirmBy ? { KILL_CONFIRM_BY: o.confirmBy } : {}),
      ...extra.env,
    },
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = once(child, 'exit');
  const lines = readline.createInterface({ input: child.stdout! });
  return Promise.race([
    once(lines, 'line').then(() => {
      if (extra.onLine) lines.on('line', extra.onLine);
      return { child, exited };
    }),
    exited.then(([code]) => {
      throw new Error(`kill-child exited before it was ready (code ${String(code)}): ${stderr}`);
    }),
  ]);
}

/** The COMMITTED transactions' events of a producerGroup: eventId -> txId. */
export async function committedEvents(ds: DataSource, group: string): Promise<Map<string, string>> {
  const rows: Array<{ event_id: string; tx_id: string }> = await ds.query(
    sql(`SELECT o.event_id, o.tx_id FROM outbox_event o JOIN tx_record t ON t.tx_id = o.tx_id
     WHERE t.producer_group = ? AND t.status = 'COMMITTED'`),
    [group],
  );
  return new Map(rows.map((r) => [r.event_id, r.tx_id]));
}

export async function runKillScenario(o: KillScenarioOptions): Promise<KillReport> {
  const log = o.log ?? (() => undefined);
  const random = seeded(o.seed ?? Date.now());
  const group = `kill_${Date.now().toString(36)}_${process.pid}`;
  const [minGap, maxGap] = o.killEveryMs ?? [1500, 4000];
  const ds = await openDataSource();
  await ensureSchema(ds);
  const collector = await new Collector(o.topic, `${group}_collect`, o.endpoints).start();
  const outcomes: CheckBackOutcome[] = [];
  const horizon = o.recoveryHorizonMs;
  const survivor: TransactionalProducer = makeProducer(ds, {
    endpoints: o.endpoints,
    topics: [o.topic],
    producerGroup: group,
    checkBack: { onResolved: (outcome) => outcomes.push(outcome) },
    ...(o.confirmBy ? { confirmBy: o.confirmBy } : {}),
    ...(horizon === 'off'
      ? { discardRecovery: false }
      : horizon !== undefined
        ? { discardRecovery: { horizonMs: horizon, intervalMs: 1000, leaseMs: 5000 } }
        : {}),
  });
  const relay =
    o.relayHorizonMs === undefined
      ? undefined
      : new OutboxRelay({
          endpoints: o.endpoints,
          dataSource: ds,
          topics: [o.topic],
          transactionTopics: [o.topic],
          discardHorizonMs: o.relayHorizonMs,
          reconcileIntervalMs: 1000,
          pollIntervalMs: 100,
        });
  const live: Instance[] = [];
  try {
    await survivor.start();
    await relay?.start();
    const instances = o.instances ?? 3;
    for (let i = 0; i < instances; i++) live.push(await startInstance(o, group));
    let kills = 0;
    while (kills < o.kills) {
      await new Promise((r) => setTimeout(r, minGap + random() * (maxGap - minGap)));
      const victim = live.splice(Math.floor(random() * live.length), 1)[0]!;
      victim.child.kill('SIGKILL');
      await victim.exited;
      kills++;
      if (kills % 10 === 0 || kills === o.kills) log(`[kill] ${kills}/${o.kills} instances SIGKILLed`);
      if (o.kills - kills >= live.length + 1) live.push(await startInstance(o, group));
      await o.afterKill?.(kills);
    }
    while (live.length > 0) {
      const last = live.pop()!;
      if (last.child.exitCode === null) last.child.kill('SIGKILL');
      await last.exited;
    }
    const killedAt = Date.now();
    log('[kill] all instances down; waiting for check-backs, discards and the recovery');

    // Settled: every committed event delivered, and the broker's check horizon passed since the
    // last kill (an in-doubt half message can still be committed or fenced until then). The
    // collector may lag behind a large backlog: give up only after settleTimeoutMs without progress.
    const delivered = () => new Set(collector.received.map((m) => m.properties.EVENT_ID));
    let lastReport = Date.now();
    let lastProgress = Date.now();
    let lastMissing = Number.POSITIVE_INFINITY;
    for (;;) {
      const committed = await committedEvents(ds, group);
      const got = delivered();
      const missing = [...committed.keys()].filter((id) => !got.has(id)).length;
      if (missing < lastMissing) lastProgress = Date.now();
      lastMissing = missing;
      if (missing === 0 && Date.now() - killedAt >= o.brokerHorizonMs) break;
      if (Date.now() - lastProgress > o.settleTimeoutMs) {
        log(
          `[kill] ${missing} committed events still not delivered after ${o.settleTimeoutMs} ms without progress`,
        );
        break;
      }
      if (Date.now() - lastReport > 15_000) {
        lastReport = Date.now();
        log(`[kill] ${missing} of ${committed.size} committed events not delivered yet`);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
    const settleMs = Date.now() - killedAt;
    // A marker after everything: once it arrives, earlier deliveries have too.
    const marker = await survivor.transact({ topic: o.topic, body: 'marker' }, async () => undefined);
    await waitFor(() => delivered().has(marker.eventIds[0]), { timeoutMs: 60_000, description: 'marker' });

    const committed = await committedEvents(ds, group);
    committed.delete(marker.eventIds[0]!);
    const ours = collector.received.filter(
      (m) => m.properties.TX_ORIGIN === group && m.properties.EVENT_ID !== marker.eventIds[0],
    );
    const report = await summarize(ds, group, o.kills, committed, ours, outcomes, settleMs);
    return { ...report, survivorRepublished: survivor.stats.discardRecovery?.republished ?? 0 };
  } finally {
    for (const i of live) i.child.kill('SIGKILL');
    await relay?.shutdown();
    await survivor.shutdown();
    await collector.stop();
    await ds.destroy();
  }
}

/** Committed vs delivered for a group: lost, phantom, duplicates (and their kinds), check-back counts. */
export async function summarize(
  ds: DataSource,
  group: string,
  kills: number,
  committed: Map<string, string>,
  received: Received[],
  outcomes: CheckBackOutcome[],
  settleMs: number,
): Promise<Omit<KillReport, 'survivorRepublished'>> {
  const copies = new Map<string, Received[]>();
  for (const m of received) {
    const id = m.properties.EVENT_ID ?? '';
    copies.set(id, [...(copies.get(id) ?? []), m]);
  }
  let brokerDuplicates = 0;
  let republishDuplicates = 0;
  for (const list of copies.values()) {
    const messages = new Set(list.map((m) => m.messageId)).size;
    brokerDuplicates += list.length - messages;
    republishDuplicates += messages - 1;
  }
  const [{ n: rolledBack }] = await ds.query(
    sql("SELECT COUNT(*) AS n FROM tx_record WHERE producer_group = ? AND status = 'ROLLED_BACK'"),
    [group],
  );
  const committedTxs = new Set(committed.values());
  const survivorCheckBacks: Record<string, number> = {};
  for (const o of outcomes) survivorCheckBacks[o.decidedBy] = (survivorCheckBacks[o.decidedBy] ?? 0) + 1;
  return {
    kills,
    group,
    committedTransactions: committedTxs.size,
    committedEvents: committed.size,
    rolledBackTransactions: Number(rolledBack),
    deliveries: received.length,
    deliveredEvents: copies.size,
    lost: [...committed.keys()].filter((id) => !copies.has(id)).length,
    phantom: [...copies.keys()].filter((id) => !committed.has(id)).length,
    duplicates: received.length - copies.size,
    brokerDuplicates,
    republishDuplicates,
    survivorCheckBacks,
    settleMs,
  };
}
