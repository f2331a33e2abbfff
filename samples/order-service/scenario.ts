/**
 * The order-service scenario that `npm run demo` runs and test/integration/order-service.test.ts
 * asserts: committed orders, rolled-back orders, one producer killed in the middle of a
 * transaction, one duplicate delivery; then a summary that checks itself against the database.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import * as path from 'node:path';
import * as readline from 'node:readline';
import type { DataSource } from 'typeorm';
import {
  collectStatus,
  OutboxRelay,
  TransactionalProducer,
  TransactionResolution,
  type CheckBackOutcome,
  type ConsumeOutcome,
  type ConsumerStats,
  type Logger,
  type ProducerStats,
  type RelayStats,
  type StatusReport,
} from '../../src'; // 'rocketmq-tx'
import { maskUrl, migrate, openDatabase, run, select } from './database';
import { createInventoryConsumer } from './inventory';
import { OrderRejectedError, OrderService, CREDIT_LIMIT_UNITS, type PlaceOrder } from './orderService';

/**
 * The producer's fence lock wait: 1 s, not the 2 s default, because the local broker asks after
 * 1 s (transactionTimeOut) every 2 s; doctor fails a lock wait longer than transactionTimeOut.
 */
export const DEMO_LOCK_WAIT_MS = 1000;

export interface ScenarioOptions {
  /** RocketMQ 5 proxy, e.g. 127.0.0.1:8081. */
  endpoints: string;
  /** MySQL/MariaDB URL. */
  dbUrl: string;
  /** TRANSACTION topic of checkout orders. */
  txTopic: string;
  /** NORMAL topic of imported orders (outbox relay). */
  eventsTopic: string;
  producerGroup: string;
  /**
   * Prefix of the inventory consumer's group; the run id is appended. Runs must not share a
   * group: a long poll left open by the previous run's consumer would pop this run's messages
   * and, its tag filter not matching, skip them for the group.
   */
  consumerGroup: string;
  /** Orders committed with transactional messages by the surviving producer. Default 6. */
  checkoutOrders?: number;
  /** Orders committed with outbox delivery (the relay sends them). Default 2, at least 1. */
  importOrders?: number;
  /** Orders whose local work throws (rolled back). Default 2. */
  rejectedOrders?: number;
  /** Upper bound of the wait for deliveries, check-back and duplicate. Default 60000 ms. */
  waitTimeoutMs?: number;
  /** Identifies this run (order ids, SKUs, the message tag). Default: time + random. */
  runId?: string;
  /** Progress lines; default none. */
  log?: (line: string) => void;
}

export interface SummaryRow {
  metric: string;
  expected: string;
  observed: string;
  database: string;
  ok: boolean;
}

export interface ScenarioReport {
  runId: string;
  tag: string;
  ok: boolean;
  /** One line per wrong number, naming it; empty when the self-check passed. */
  failures: string[];
  rows: SummaryRow[];
  durationMs: number;
  crash: { window: string; orderId: string; txId: string; eventId: string; pid: number };
  checkBacks: CheckBackOutcome[];
  producerStats: ProducerStats;
  consumerStats: ConsumerStats;
  relayStats: RelayStats;
  /** What the run did and saw; {@link selfCheck} compares it with the database. */
  facts: RunFacts;
}

/** What a run did and what its components reported, for {@link selfCheck}. */
export interface RunFacts {
  startedAt: number;
  counts: { checkout: number; import: number; rejected: number };
  skus: string[];
  topics: string[];
  consumerGroup: string;
  /** Every order that must be delivered: the committed ones and the crashed one. */
  expected: Placed[];
  committed: Placed[];
  rejected: Placed[];
  crashed: Placed;
  /** The imported order whose event was re-sent as a duplicate. */
  dupTarget: Placed | undefined;
  outcomes: ConsumeOutcome[];
  checkBacks: CheckBackOutcome[];
  producerStats: ProducerStats;
  finalUndelivered: { count: number; oldestMs: number };
}

type Kind = 'checkout' | 'import' | 'rejected' | 'crash';
interface Step {
  kind: Kind;
  order: PlaceOrder;
}
export interface Placed {
  placedAt: number;
  orderId: string;
  txId: string;
  eventId: string;
  sku: string;
  qty: number;
}

export const CRASH_WINDOW =
  'after the local COMMIT (order + tx_record durable), before EndTransaction(COMMIT) reached the broker';
const INITIAL_STOCK = 100;
const CHILD = path.join(__dirname, 'crash-child.ts');
const CHILD_TIMEOUT_MS = 45_000;

/** Runs the whole scenario; resolves with the self-checked report (rejects only if setup fails). */
export async function runScenario(options: ScenarioOptions): Promise<ScenarioReport> {
  const t0 = Date.now();
  const log = (line: string) =>
    options.log?.(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${line}`);
  const counts = {
    checkout: count('checkoutOrders', options.checkoutOrders, 6, 0),
    import: count('importOrders', options.importOrders, 2, 1),
    rejected: count('rejectedOrders', options.rejectedOrders, 2, 0),
  };
  const waitTimeoutMs = options.waitTimeoutMs ?? 60_000;
  const runId = options.runId ?? `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const tag = `run_${runId}`;
  const skus = [`widget-${runId}`, `gadget-${runId}`];
  const topics = [options.txTopic, options.eventsTopic];
  const consumerGroup = `${options.consumerGroup}_${runId}`;
  const plan = planSteps(runId, skus, counts);

  const sdkLogger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (fields, message) => log(`  sdk warn: ${message} ${JSON.stringify(fields)}`),
    error: (fields, message) => log(`  sdk error: ${message} ${JSON.stringify(fields)}`),
  };

  log(`run ${runId}: broker ${options.endpoints}, database ${maskUrl(options.dbUrl)}`);
  log(`topics ${options.txTopic} (transactional) and ${options.eventsTopic} (outbox relay), tag ${tag}`);
  const ds = await openDatabase(options.dbUrl, { poolSize: 16 });
  const stops: Array<() => Promise<void>> = [];
  let killChild: (() => void) | undefined;
  try {
    const ran = await migrate(ds);
    log(ran.length > 0 ? `migrations run: ${ran.join(', ')}` : 'migrations: up to date');
    for (const sku of skus) {
      await select(ds, 'INSERT INTO inventory_stock (sku, available, reserved) VALUES (?, ?, 0)', [
        sku,
        INITIAL_STOCK,
      ]);
    }
    log(`stock: ${skus.map((s) => `${s} = ${INITIAL_STOCK}`).join(', ')}`);

    // --- what the components report ---------------------------------------------------------
    const outcomes: ConsumeOutcome[] = [];
    const checkBacks: CheckBackOutcome[] = [];
    let crashInfo: { txId: string; killedAt: number } | undefined;
    let forcedDuplicate: string | undefined;
    const onOutcome = (o: ConsumeOutcome) => {
      outcomes.push(o);
      if (!('envelope' in o)) {
        log(`inventory: ${o.kind} message ${o.messageId} (attempt ${o.deliveryAttempt})`);
        return;
      }
      const data = o.envelope.data as { orderId?: string; sku?: string; qty?: number };
      const via = o.topic === options.txTopic ? 'transactional message' : 'relay';
      if (o.kind === 'APPLIED') {
        log(
          `inventory: reserved ${data.qty} x ${data.sku} for ${data.orderId} (${via}, attempt ${o.deliveryAttempt})`,
        );
      } else if (o.kind === 'DUPLICATE') {
        log(
          `inventory: DUPLICATE of event ${o.envelope.eventId} (${data.orderId}) ignored: acked, handler not called ` +
            (o.envelope.eventId === forcedDuplicate
              ? '(the forced one)'
              : '(a broker redelivery: at least once)'),
        );
      } else {
        log(`inventory: ${o.kind} for ${data.orderId} (attempt ${o.deliveryAttempt}); redelivered later`);
      }
    };
    const onResolved = (c: CheckBackOutcome) => {
      checkBacks.push(c);
      const why =
        crashInfo && c.txId === crashInfo.txId
          ? `the crashed instance's transaction, ${((Date.now() - crashInfo.killedAt) / 1000).toFixed(1)} s after the kill`
          : 'a transaction of this instance: the broker checked although EndTransaction was sent';
      log(
        `check-back: tx ${c.txId ?? '(no TX_ID)'} answered ${c.resolution} by this producer in ${c.durationMs} ms (${why})`,
      );
    };

    // --- start: inventory consumer, order-service producer, relay, and the instance that will die
    const consumer = createInventoryConsumer({
      endpoints: options.endpoints,
      dataSource: ds,
      consumerGroup,
      subscriptions: [
        { topic: options.txTopic, tag },
        { topic: options.eventsTopic, tag },
      ],
      onOutcome,
      logger: sdkLogger,
    });
    stops.push(() => consumer.shutdown());
    const producer = new TransactionalProducer({
      endpoints: options.endpoints,
      dataSource: ds,
      producerGroup: options.producerGroup,
      topics: [options.txTopic, options.eventsTopic],
      checkBack: { onResolved, lockWaitTimeoutMs: DEMO_LOCK_WAIT_MS },
      startTimeoutMs: 30_000,
      logger: sdkLogger,
    });
    stops.push(() => producer.shutdown());
    const relay = new OutboxRelay({
      endpoints: options.endpoints,
      dataSource: ds,
      topics: [options.eventsTopic],
      pollIntervalMs: 200,
      reconcileDiscarded: false,
      startTimeoutMs: 30_000,
      logger: sdkLogger,
    });
    stops.push(() => relay.shutdown());
    const child = spawnCrashChild(options, tag);
    killChild = child.kill;
    await Promise.all([consumer.start(), producer.start(), relay.start(), child.ready]);
    log(
      `started: inventory consumer (group ${consumerGroup}), order-service producer ` +
        `(group ${options.producerGroup}), outbox relay, and a second order-service instance (pid ${child.pid}, same group)`,
    );

    // --- place the orders ---------------------------------------------------------------------
    const service = new OrderService(producer, {
      txTopic: options.txTopic,
      eventsTopic: options.eventsTopic,
      tag,
    });
    const committed: Placed[] = [];
    const rejected: Placed[] = [];
    const problems: string[] = [];
    let crash: (Placed & { pid: number; killedAt: number }) | undefined;
    for (const step of plan) {
      const { order } = step;
      if (step.kind === 'crash') {
        log(`crash: instance pid ${child.pid} places ${order.id}; it is SIGKILLed ${CRASH_WINDOW}`);
        const placedAt = Date.now();
        const { txId } = await child.place(order);
        child.kill();
        const killedAt = Date.now();
        await child.exited;
        const [row] = await select(
          ds,
          `SELECT t.status, t.resolved_by, o.event_id, o.status AS outbox_status
             FROM tx_record t LEFT JOIN outbox_event o ON o.tx_id = t.tx_id WHERE t.tx_id = ?`,
          [txId],
        );
        crash = {
          placedAt,
          orderId: order.id,
          txId,
          eventId: row?.event_id ?? '',
          sku: order.sku,
          qty: order.qty,
          pid: child.pid,
          killedAt,
        };
        crashInfo = { txId, killedAt };
        log(
          `crash: pid ${child.pid} killed; database: order ${order.id} present, tx_record ${txId} = ` +
            `${row?.status}/${row?.resolved_by}, its event ${row?.outbox_status}; the half message waits for a check-back`,
        );
        continue;
      }
      try {
        const placedAt = Date.now();
        const placed = await service.placeOrder(order);
        const how = order.channel === 'checkout' ? 'transactional message' : 'outbox row for the relay';
        const retried = placed.attempts > 1 ? `, fenced and retried: ${placed.attempts} attempts` : '';
        log(`order ${order.id} committed (${order.qty} x ${order.sku}, ${how}${retried}) tx ${placed.txId}`);
        if (step.kind === 'rejected')
          problems.push(`order ${order.id} should have been rolled back but committed`);
        else committed.push({ ...placed, placedAt, sku: order.sku, qty: order.qty });
      } catch (err) {
        if (step.kind === 'rejected' && err instanceof OrderRejectedError) {
          rejected.push({
            placedAt: 0,
            orderId: order.id,
            txId: err.txId,
            eventId: err.eventId,
            sku: order.sku,
            qty: order.qty,
          });
          log(
            `order ${order.id} ROLLED BACK (${order.channel}): ${err.message}; transact rethrew the work's error`,
          );
        } else {
          problems.push(
            `order ${order.id} (${step.kind}) failed: ${err instanceof Error ? err.message : String(err)}`,
          );
          log(`order ${order.id} FAILED: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
    }
    if (!crash) throw new Error('the plan has no crash step');
    const crashed = crash;

    // --- wait: every committed event applied, the check-back answered, one duplicate ignored --
    const expected = [...committed, crashed];
    const expectedIds = expected.map((p) => p.eventId);
    const placedAt = new Map(expected.map((p) => [p.eventId, p.placedAt]));
    const dupTarget = committed.find((p) =>
      plan.some((s) => s.order.id === p.orderId && s.kind === 'import'),
    );
    if (!dupTarget) problems.push('no imported order committed: nothing to re-send as a duplicate');
    const applied = () =>
      new Set(outcomes.flatMap((o) => (o.kind === 'APPLIED' ? [o.envelope.eventId] : [])));
    const duplicatesOf = (id: string) =>
      outcomes.filter((o) => o.kind === 'DUPLICATE' && o.envelope.eventId === id).length;
    const crashAnswered = () => checkBacks.some((c) => c.txId === crashed.txId);
    let resentAt: number | undefined;
    let lastProgress = 0;
    const deadline = Date.now() + waitTimeoutMs;
    for (;;) {
      const done = applied();
      const unsent = await undelivered(ds, placedAt);
      if (dupTarget && resentAt === undefined && done.has(dupTarget.eventId)) {
        // As if the relay died after its send and before it marked the row: the row goes again.
        const res = await run(
          ds,
          `UPDATE outbox_event SET status = 'NEW', next_attempt_at = CURRENT_TIMESTAMP(3)
            WHERE event_id = ? AND status = 'SENT'`,
          [dupTarget.eventId],
        );
        if (res.affected === 1) {
          resentAt = Date.now();
          forcedDuplicate = dupTarget.eventId;
          log(
            `duplicate: outbox row of ${dupTarget.orderId} (event ${dupTarget.eventId}) set SENT -> NEW; the relay sends it again`,
          );
        }
      }
      const dupSeen = dupTarget !== undefined && duplicatesOf(dupTarget.eventId) > 0;
      if (expectedIds.every((id) => done.has(id)) && crashAnswered() && dupSeen && unsent.count === 0) break;
      if (Date.now() >= deadline) {
        log(`waited ${waitTimeoutMs} ms: giving up (see the summary)`);
        break;
      }
      if (Date.now() - lastProgress >= 3000) {
        lastProgress = Date.now();
        const st = await collectStatus(ds, { topics });
        const crashState = crashAnswered()
          ? 'answered'
          : `pending (${((Date.now() - crashed.killedAt) / 1000).toFixed(1)} s since the kill)`;
        log(
          `waiting: ${expectedIds.filter((id) => done.has(id)).length}/${expectedIds.length} events applied; ` +
            `check-back for the crashed tx: ${crashState}; ` +
            `duplicate: ${dupSeen ? 'ignored' : resentAt ? 're-sent' : 'not yet'}; ` +
            `collectStatus: ${st.inDoubt.transactions} tx in doubt, ${st.outbox.undelivered} undelivered ` +
            `(oldest ${age(st.outbox.oldestUndeliveredAgeMs)})`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const finalUndelivered = await undelivered(ds, placedAt);

    // --- stop, then check every number against the database -------------------------------
    log('stopping consumer, producer and relay');
    await stopAll(stops);
    const producerStats = producer.stats;
    const consumerStats = consumer.stats;
    const relayStats = { ...relay.stats };
    const facts: RunFacts = {
      startedAt: t0,
      counts,
      skus,
      topics,
      consumerGroup,
      expected,
      committed,
      rejected,
      crashed,
      dupTarget,
      outcomes,
      checkBacks,
      producerStats,
      finalUndelivered,
    };
    const { rows, failures: wrong } = await selfCheck(ds, facts);
    const failures = [...problems, ...wrong];
    return {
      runId,
      tag,
      ok: failures.length === 0,
      failures,
      rows,
      durationMs: Date.now() - t0,
      crash: {
        window: CRASH_WINDOW,
        orderId: crashed.orderId,
        txId: crashed.txId,
        eventId: crashed.eventId,
        pid: crashed.pid,
      },
      checkBacks,
      producerStats,
      consumerStats,
      relayStats,
      facts,
    };
  } finally {
    killChild?.();
    await stopAll(stops);
    await ds.destroy().catch(() => undefined);
  }
}

function count(name: string, value: number | undefined, fallback: number, min: number): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < min || v > 200) {
    throw new RangeError(`options.${name} must be an integer from ${min} to 200, got ${String(value)}`);
  }
  return v;
}

/**
 * C C I R C C I R ... with the crash in the middle. Committed orders have their own customer;
 * a rejected order reuses the previous committed order's customer with enough units to pass
 * the credit limit, which the local work finds by reading the customer's orders.
 */
function planSteps(
  runId: string,
  skus: string[],
  counts: { checkout: number; import: number; rejected: number },
): Step[] {
  const left = { ...counts };
  const kinds: Kind[] = [];
  while (left.checkout + left.import + left.rejected > 0) {
    for (const k of ['checkout', 'checkout', 'import', 'rejected'] as const) {
      if (left[k] > 0) {
        kinds.push(k);
        left[k]--;
      }
    }
  }
  kinds.splice(Math.floor(kinds.length / 2), 0, 'crash');
  let lastCustomer = `c-${runId}-0`;
  return kinds.map((kind, i) => {
    const n = String(i + 1).padStart(2, '0');
    const sku = skus[i % skus.length]!;
    if (kind === 'rejected') {
      return {
        kind,
        order: {
          id: `o-${runId}-${n}`,
          customer: lastCustomer,
          sku,
          qty: CREDIT_LIMIT_UNITS,
          channel: i % 2 ? 'import' : 'checkout',
        },
      };
    }
    lastCustomer = `c-${runId}-${n}`;
    return {
      kind,
      order: {
        id: `o-${runId}-${n}`,
        customer: lastCustomer,
        sku,
        qty: 1 + (i % 3),
        channel: kind === 'import' ? 'import' : 'checkout',
      },
    };
  });
}

interface CrashChild {
  pid: number;
  ready: Promise<void>;
  place(order: PlaceOrder): Promise<{ txId: string }>;
  kill(): void;
  exited: Promise<unknown>;
}

/** The second order-service instance (samples/order-service/crash-child.ts), driven over stdio. */
function spawnCrashChild(options: ScenarioOptions, tag: string): CrashChild {
  const child = spawn(
    process.execPath,
    [
      '-r',
      'ts-node/register/transpile-only',
      CHILD,
      options.txTopic,
      options.eventsTopic,
      options.producerGroup,
      tag,
    ],
    {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: {
        ...process.env,
        TS_NODE_TRANSPILE_ONLY: '1',
        ROCKETMQ_ENDPOINTS: options.endpoints,
        ROCKETMQ_TX_DB_URL: options.dbUrl,
      },
    },
  );
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = once(child, 'exit');
  const lines = readline.createInterface({ input: child.stdout });
  const nextMessage = async (state: string): Promise<Record<string, unknown>> => {
    let timer: NodeJS.Timeout | undefined;
    const line = await Promise.race([
      once(lines, 'line').then(([l]) => String(l)),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `the crash child did not report "${state}" within ${CHILD_TIMEOUT_MS} ms: ${stderr.trim()}`,
              ),
            ),
          CHILD_TIMEOUT_MS,
        );
      }),
      exited.then(([code, signal]) => {
        throw new Error(`the crash child exited early (${String(code ?? signal)}): ${stderr.trim()}`);
      }),
    ]).finally(() => clearTimeout(timer));
    const message = JSON.parse(line) as Record<string, unknown>;
    if (message.state !== state) throw new Error(`crash child said ${line}, expected state ${state}`);
    return message;
  };
  const ready = nextMessage('ready').then(() => undefined);
  return {
    pid: child.pid ?? -1,
    ready,
    async place(order) {
      const inWindow = nextMessage('in-window');
      child.stdin.write(`${JSON.stringify(order)}\n`);
      const { txId } = (await inWindow) as { txId: string };
      return { txId };
    },
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
    exited,
  };
}

async function stopAll(stops: Array<() => Promise<void>>): Promise<void> {
  const pending = stops.splice(0);
  await Promise.all(pending.map((stop) => stop().catch(() => undefined)));
}

/** This run's events whose outbox row is not SENT yet, and the age of the oldest (since it was placed). */
async function undelivered(
  ds: DataSource,
  placedAt: ReadonlyMap<string, number>,
): Promise<{ count: number; oldestMs: number }> {
  const ids = [...placedAt.keys()];
  if (ids.length === 0) return { count: 0, oldestMs: 0 };
  const rows: Array<{ event_id: string }> = await select(
    ds,
    `SELECT event_id FROM outbox_event WHERE status = 'SENT' AND event_id IN (${ids.map(() => '?').join(', ')})`,
    ids,
  );
  const sent = new Set(rows.map((r) => r.event_id));
  const waiting = ids.filter((id) => !sent.has(id)).map((id) => placedAt.get(id)!);
  return { count: waiting.length, oldestMs: waiting.length ? Date.now() - Math.min(...waiting) : 0 };
}

/**
 * Compares every number of a run with what the scenario expects and with the database; a row
 * per metric, and a failure line naming each wrong one. Read-only.
 */
export async function selfCheck(
  ds: DataSource,
  facts: RunFacts,
): Promise<{ rows: SummaryRow[]; failures: string[] }> {
  const expectedIds = facts.expected.map((p) => p.eventId);
  const status = await collectStatus(ds, { topics: facts.topics, consumerGroups: [facts.consumerGroup] });
  const older = await olderUndelivered(ds, facts.topics, expectedIds);
  const db = await inspect(ds, {
    expected: facts.expected,
    rejected: facts.rejected,
    skus: facts.skus,
    consumerGroup: facts.consumerGroup,
    crashTxId: facts.crashed.txId,
  });
  const rows = buildRows({ ...facts, db, status, older, runMs: Date.now() - facts.startedAt });
  const failures = rows
    .filter((r) => !r.ok)
    .map((r) => `${r.metric}: expected ${r.expected}; observed ${r.observed}; database ${r.database}`);
  return { rows, failures };
}

/** NEW or IN_FLIGHT rows on these topics that are not this run's (left by earlier, interrupted runs). */
async function olderUndelivered(ds: DataSource, topics: string[], runEventIds: string[]): Promise<number> {
  const [row] = await select(
    ds,
    `SELECT COUNT(*) AS n FROM outbox_event
      WHERE status IN ('NEW', 'IN_FLIGHT') AND topic IN (${topics.map(() => '?').join(', ')})
        AND event_id NOT IN (${runEventIds.map(() => '?').join(', ')})`,
    [...topics, ...runEventIds],
  );
  return Number(row.n);
}

function age(ms: number | null): string {
  return ms === null ? 'null (nothing undelivered)' : `${(ms / 1000).toFixed(1)} s`;
}

interface DbFacts {
  orderRows: number;
  rejectedOrderRows: number;
  rejectedCommittedTx: number;
  reservations: Array<{ order_id: string; sku: string; qty: number; status: string; event_id: string }>;
  rejectedReservations: number;
  stock: Map<string, { available: number; reserved: number }>;
  consumedRows: number;
  outboxSent: number;
  crashTx: { status: string; resolved_by: string } | undefined;
}

async function inspect(
  ds: DataSource,
  q: { expected: Placed[]; rejected: Placed[]; skus: string[]; consumerGroup: string; crashTxId: string },
): Promise<DbFacts> {
  const list = (n: number) => (n === 0 ? 'NULL' : Array.from({ length: n }, () => '?').join(', '));
  const orderIds = q.expected.map((p) => p.orderId);
  const eventIds = q.expected.map((p) => p.eventId);
  const rejectedIds = q.rejected.map((p) => p.orderId);
  const n = async (sql: string, params: unknown[]) => Number((await select(ds, sql, params))[0].n);
  const reservations = (
    await select<Record<string, unknown>>(
      ds,
      `SELECT order_id, sku, qty, status, event_id FROM inventory_reservation WHERE order_id IN (${list(orderIds.length)})`,
      orderIds,
    )
  ).map((r) => ({ ...r, qty: Number(r.qty) }) as DbFacts['reservations'][number]);
  const stockRows: Array<{ sku: string; available: number; reserved: number }> = await select(
    ds,
    `SELECT sku, available, reserved FROM inventory_stock WHERE sku IN (${list(q.skus.length)})`,
    q.skus,
  );
  const [crashTx] = await select(ds, 'SELECT status, resolved_by FROM tx_record WHERE tx_id = ?', [
    q.crashTxId,
  ]);
  return {
    orderRows: await n(
      `SELECT COUNT(*) AS n FROM shop_order WHERE id IN (${list(orderIds.length)})`,
      orderIds,
    ),
    rejectedOrderRows: await n(
      `SELECT COUNT(*) AS n FROM shop_order WHERE id IN (${list(rejectedIds.length)})`,
      rejectedIds,
    ),
    rejectedCommittedTx: await n(
      `SELECT COUNT(*) AS n FROM tx_record WHERE status = 'COMMITTED' AND tx_id IN (${list(q.rejected.length)})`,
      q.rejected.map((p) => p.txId),
    ),
    reservations,
    rejectedReservations: await n(
      `SELECT COUNT(*) AS n FROM inventory_reservation WHERE order_id IN (${list(rejectedIds.length)})`,
      rejectedIds,
    ),
    stock: new Map(
      stockRows.map((s) => [s.sku, { available: Number(s.available), reserved: Number(s.reserved) }]),
    ),
    consumedRows: await n(
      `SELECT COUNT(*) AS n FROM consumed_event WHERE consumer_group = ? AND event_id IN (${list(eventIds.length)})`,
      [q.consumerGroup, ...eventIds],
    ),
    outboxSent: await n(
      `SELECT COUNT(*) AS n FROM outbox_event WHERE status = 'SENT' AND event_id IN (${list(eventIds.length)})`,
      eventIds,
    ),
    crashTx,
  };
}

function buildRows(
  x: RunFacts & {
    db: DbFacts;
    status: StatusReport;
    older: number;
    runMs: number;
  },
): SummaryRow[] {
  const { counts, expected, rejected, crashed, dupTarget, outcomes, checkBacks, db, older } = x;
  const C = expected.length;
  const expectedIds = new Set(expected.map((p) => p.eventId));
  const rejectedIds = new Set(rejected.map((p) => p.eventId));
  const appliedCount = new Map<string, number>();
  const dupCount = new Map<string, number>();
  for (const o of outcomes) {
    if (o.kind === 'APPLIED')
      appliedCount.set(o.envelope.eventId, (appliedCount.get(o.envelope.eventId) ?? 0) + 1);
    if (o.kind === 'DUPLICATE') dupCount.set(o.envelope.eventId, (dupCount.get(o.envelope.eventId) ?? 0) + 1);
  }
  const appliedOnce = [...expectedIds].filter((id) => appliedCount.get(id) === 1).length;
  const appliedTwice = [...appliedCount.values()].filter((c) => c > 1).length;
  const appliedUnexpected = [...appliedCount.keys()].filter((id) => !expectedIds.has(id)).length;
  const rejectedDelivered = outcomes.filter(
    (o) => 'envelope' in o && rejectedIds.has(o.envelope.eventId),
  ).length;
  const totalDup = [...dupCount.values()].reduce((a, b) => a + b, 0);
  const forcedDup = dupTarget ? (dupCount.get(dupTarget.eventId) ?? 0) : 0;
  const dupReservations = dupTarget
    ? db.reservations.filter((r) => r.order_id === dupTarget.orderId).length
    : 0;

  const crashAnswers = checkBacks.filter((c) => c.txId === crashed.txId);
  const committedTx = new Set(expected.map((p) => p.txId));
  const rejectedTx = new Set(rejected.map((p) => p.txId));
  const wrongAnswers = checkBacks.filter(
    (c) =>
      (c.txId !== undefined && committedTx.has(c.txId) && c.resolution === TransactionResolution.ROLLBACK) ||
      (c.txId !== undefined && rejectedTx.has(c.txId) && c.resolution === TransactionResolution.COMMIT),
  ).length;
  const runAnswers = checkBacks.filter(
    (c) => c.txId !== undefined && (committedTx.has(c.txId) || rejectedTx.has(c.txId)),
  );
  const cb = x.producerStats.checkBack;
  const crashRow = db.crashTx ? `${db.crashTx.status}/${db.crashTx.resolved_by}` : 'no row';
  const firstAnswer = crashAnswers[0];

  const unitsBySku = new Map<string, number>();
  for (const p of expected) unitsBySku.set(p.sku, (unitsBySku.get(p.sku) ?? 0) + p.qty);
  const stockOk = [...unitsBySku].every(([sku, units]) => {
    const s = db.stock.get(sku);
    return s !== undefined && s.reserved === units && s.available === INITIAL_STOCK - units;
  });
  const fmtUnits = (m: Map<string, number>) =>
    [...m].map(([sku, u]) => `${sku.split('-')[0]} ${u}`).join(', ');
  const dbUnits = new Map([...unitsBySku.keys()].map((sku) => [sku, db.stock.get(sku)?.reserved ?? 0]));
  const reservedOk = db.reservations.filter((r) => r.status === 'RESERVED').length;

  const row = (
    metric: string,
    expectedText: string,
    observed: string,
    database: string,
    ok: boolean,
  ): SummaryRow => ({
    metric,
    expected: expectedText,
    observed,
    database,
    ok,
  });
  return [
    row(
      'orders committed',
      `${C} (${counts.checkout} checkout + ${counts.import} import + 1 crashed)`,
      `${x.committed.length} transact() + 1 crashed`,
      `${db.orderRows} shop_order rows`,
      x.committed.length + 1 === C && db.orderRows === C,
    ),
    row(
      'orders rolled back',
      `${counts.rejected} (local work threw)`,
      `${rejected.length} OrderRejectedError rethrown`,
      `${db.rejectedOrderRows} order rows, ${db.rejectedCommittedTx} COMMITTED tx_record`,
      rejected.length === counts.rejected && db.rejectedOrderRows === 0 && db.rejectedCommittedTx === 0,
    ),
    row(
      'events delivered (applied)',
      `${C}, each once`,
      `${appliedOnce} applied once${appliedTwice ? `, ${appliedTwice} applied twice` : ''}${appliedUnexpected ? `, ${appliedUnexpected} unexpected` : ''}`,
      `${db.consumedRows} consumed_event, ${db.reservations.length} reservations`,
      appliedOnce === C &&
        appliedTwice === 0 &&
        appliedUnexpected === 0 &&
        db.consumedRows === C &&
        db.reservations.length === C,
    ),
    row(
      'rolled-back events delivered',
      '0',
      `${rejectedDelivered}`,
      `${db.rejectedReservations} reservations`,
      rejectedDelivered === 0 && db.rejectedReservations === 0,
    ),
    row(
      'duplicates ignored',
      `>= 1: the forced one (${dupTarget?.orderId ?? '-'} re-sent by the relay) + broker redeliveries`,
      `${totalDup}: forced ${forcedDup}, broker ${totalDup - forcedDup}`,
      `${dupReservations} reservation for ${dupTarget?.orderId ?? '-'}`,
      forcedDup >= 1 && dupReservations === 1 && [...dupCount.keys()].every((id) => expectedIds.has(id)),
    ),
    row(
      'stock reserved (units)',
      fmtUnits(unitsBySku),
      `${reservedOk} reservations RESERVED`,
      `${fmtUnits(dbUnits)}; available = ${INITIAL_STOCK} - reserved: ${stockOk ? 'yes' : 'NO'}`,
      stockOk && reservedOk === C,
    ),
    row(
      'check-backs answered (crashed tx)',
      '>= 1, COMMIT, by the survivor: tx_record row found',
      crashAnswers.length
        ? `${crashAnswers.length} x ${[...new Set(crashAnswers.map((c) => c.resolution))].join('/')} (onResolved), first ${firstAnswer?.durationMs} ms to decide`
        : 'none',
      `tx_record ${crashRow}`,
      crashAnswers.length >= 1 &&
        crashAnswers.every((c) => c.resolution === TransactionResolution.COMMIT) &&
        crashRow === 'COMMITTED/PRODUCER',
    ),
    row(
      'check-backs answered (all)',
      'no wrong answer for this run',
      `producer stats: ${cb.received} received, ${cb.commit} COMMIT, ${cb.rollback} ROLLBACK, ${cb.unknown} UNKNOWN; ${runAnswers.length} for this run`,
      `${wrongAnswers} contradict the database`,
      wrongAnswers === 0,
    ),
    row(
      'oldest undelivered age',
      older === 0 ? 'none (null): every event SENT' : `none of this run; ${older} older rows (earlier runs)`,
      `collectStatus: ${age(x.status.outbox.oldestUndeliveredAgeMs)}, ${x.status.outbox.undelivered} undelivered, ${x.status.inDoubt.transactions} tx in doubt`,
      `${x.finalUndelivered.count} of this run not SENT (${db.outboxSent}/${C} SENT), ${older} older`,
      x.finalUndelivered.count === 0 &&
        db.outboxSent === C &&
        x.status.outbox.undelivered === older &&
        (older === 0
          ? x.status.outbox.oldestUndeliveredAgeMs === null
          : (x.status.outbox.oldestUndeliveredAgeMs ?? 0) >= x.runMs - 2000),
    ),
  ];
}

/** The summary as a plain-text table. */
export function formatSummary(report: ScenarioReport): string {
  const header: SummaryRow = {
    metric: 'metric',
    expected: 'expected',
    observed: 'observed',
    database: 'database',
    ok: true,
  };
  const cells = (r: SummaryRow, head = false) => [
    r.metric,
    r.expected,
    r.observed,
    r.database,
    head ? 'check' : r.ok ? 'ok' : 'WRONG',
  ];
  const table = [cells(header, true), ...report.rows.map((r) => cells(r))];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((t) => t[i]!.length)));
  const line = (t: string[]) => `| ${t.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  const sep = `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`;
  const p = report.producerStats;
  const c = report.consumerStats;
  const r = report.relayStats;
  return [
    line(table[0]!),
    sep,
    ...table.slice(1).map(line),
    '',
    `crash window: ${report.crash.window}; pid ${report.crash.pid}, order ${report.crash.orderId}, tx ${report.crash.txId}`,
    `producer stats: committed ${p.committed}, rolledBack ${p.rolledBack}, fenced ${p.fenced}, endTransactionFailures ${p.endTransactionFailures}; ` +
      `check-back ${JSON.stringify(p.checkBack)}`,
    `consumer stats: received ${c.received}, applied ${c.applied}, duplicates ${c.duplicates}, handlerFailures ${c.handlerFailures}, storeFailures ${c.storeFailures}, deadLettered ${c.deadLettered}`,
    `relay stats: claimed ${r.claimed}, sent ${r.sent}, failed ${r.failed}, dead ${r.dead}`,
  ].join('\n');
}
