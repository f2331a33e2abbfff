import { AsyncLocalStorage } from 'node:async_hooks';
import * as otel from '@opentelemetry/api';
import { Registry } from 'prom-client';
import type { DataSource } from 'typeorm';
import {
  IdempotentConsumer,
  RocketMqTxMetrics,
  TransactionFencedError,
  defineEvent,
  on,
  type CheckBackOutcome,
  type OutboxRelay,
  type TransactionalProducer,
} from '../../src';
import { ensureSchema, openDataSource, sql } from '../helpers/db';
import { ENDPOINTS, waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';
import { makeRelay, outboxRow } from '../helpers/relay';

// Only this file uses these topics (rmqtx_tx_15 is status.test.ts's).
const TX_TOPIC = 'rmqtx_tx_14';
const NORMAL = 'rmqtx_normal_8';
const GROUP = 'it_metrics';
const RUN = `${process.pid}_${Date.now().toString(36)}`;
// A new consumer group may start at the oldest message: this run's messages carry this tag.
const TAG = `run_${RUN}`;

const OrderPlaced = defineEvent<{ n: number }>({
  eventType: 'OrderPlaced',
  eventVersion: 1,
  aggregateType: 'MetricsOrder',
});

type Labels = Record<string, string>;

async function sample(reg: Registry, name: string, labels: Labels, metricName = name): Promise<number> {
  const metric = reg.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  const hit = values.find(
    (v) =>
      ((v as { metricName?: string }).metricName ?? name) === metricName &&
      Object.entries(labels).every(([k, x]) => (v.labels as Labels)[k] === x) &&
      Object.keys(v.labels).filter((k) => k !== 'le').length === Object.keys(labels).length,
  );
  return hit ? hit.value : 0;
}

async function sqlCount(ds: DataSource, text: string, params: unknown[]): Promise<number> {
  const rows: Array<{ n: unknown }> = await ds.query(sql(text), params);
  return Number(rows[0]!.n);
}

describe('RocketMqTxMetrics against real broker traffic and real rows', () => {
  let ds: DataSource;
  let reg: Registry;
  let metrics: RocketMqTxMetrics;
  let producer: TransactionalProducer;
  let relay: OutboxRelay;
  let consumer: IdempotentConsumer;
  const extra: TransactionalProducer[] = [];
  const answers: CheckBackOutcome[] = [];
  const applied: string[] = [];
  const traces = new Map<string, { traceId: string | null; traceparent: string | undefined }>();
  let dropEnd = false;
  let fenceNext = false;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    reg = new Registry();
    metrics = new RocketMqTxMetrics({
      register: reg,
      status: {
        dataSource: ds,
        topics: [TX_TOPIC, NORMAL],
        consumerGroups: [`it_metrics_c_${RUN}`],
        cacheMs: 0,
      },
    });
    producer = makeProducer(
      ds,
      { topics: [TX_TOPIC, NORMAL], producerGroup: GROUP, checkBack: { onResolved: (o) => answers.push(o) } },
      {
        beforeEnd: async () => {
          if (dropEnd) throw new Error('EndTransaction lost (test)');
          return true;
        },
        afterHalf: async (half) => {
          if (!fenceNext) return;
          await waitFor(
            () => answers.some((a) => a.messageId === half.messageId && a.resolution === 'ROLLBACK'),
            { timeoutMs: 60_000, description: 'the check-back to fence the transaction' },
          );
        },
      },
    );
    metrics.attach(producer);
    relay = makeRelay(ds, { topics: [NORMAL] }).relay;
    metrics.attach(relay);
    consumer = new IdempotentConsumer({
      endpoints: ENDPOINTS,
      dataSource: ds,
      consumerGroup: `it_metrics_c_${RUN}`,
      subscriptions: [{ topic: TX_TOPIC, tag: TAG }],
      handlers: [
        on(OrderPlaced, async (e, ctx) => {
          applied.push(e.eventId);
          traces.set(e.eventId, { traceId: e.traceId, traceparent: ctx.message.traceparent });
        }),
      ],
      startTimeoutMs: 30_000,
      retry: { initialDelayMs: 200, maxDelayMs: 1000 },
    });
    metrics.attach(consumer);
    await Promise.all([producer.start(), consumer.start()]);
  });

  afterAll(async () => {
    await Promise.all([
      consumer?.shutdown(),
      relay?.shutdown(),
      producer?.shutdown(),
      ...extra.map((p) => p.shutdown()),
    ]);
    await ds?.destroy();
  });

  it('counts transactions, check-backs, relay deliveries and consumer outcomes as they happen', async () => {
    const tx = (outcome: string, delivery = 'transactional') =>
      sample(reg, 'rocketmq_tx_transactions_total', { producer_group: GROUP, outcome, delivery });
    const event = (n: number) =>
      OrderPlaced.create({ aggregateId: `m-${RUN}-${n}`, aggregateVersion: 1, data: { n } });

    // 1. Committed, delivered and applied.
    const first = event(1);
    await producer.transact({ topic: TX_TOPIC, tag: TAG, event: first }, async () => 'ok');
    expect(await tx('committed')).toBe(1);

    // 2. Rolled back: work throws.
    await expect(
      producer.transact({ topic: TX_TOPIC, tag: TAG, event: event(2) }, async () => {
        throw new Error('business says no');
      }),
    ).rejects.toThrow('business says no');
    expect(await tx('rolled_back')).toBe(1);

    // 3. EndTransaction lost: the broker's check-back finds the committed row and commits.
    dropEnd = true;
    const doubted = await producer.transact({ topic: TX_TOPIC, tag: TAG, event: event(3) }, async () => 'ok');
    dropEnd = false;
    expect(await sample(reg, 'rocketmq_tx_end_transaction_failures_total', { producer_group: GROUP })).toBe(
      1,
    );
    await waitFor(() => answers.some((a) => a.txId === doubted.txId && a.resolution === 'COMMIT'), {
      timeoutMs: 60_000,
      description: 'the check-back COMMIT of the transaction whose EndTransaction was lost',
    });
    expect(
      await sample(reg, 'rocketmq_tx_check_backs_total', {
        producer_group: GROUP,
        answer: 'commit',
        decided_by: 'row_found',
      }),
    ).toBeGreaterThanOrEqual(1);

    // 4. Fenced: the check-back inserts the tombstone before the producer's row.
    fenceNext = true;
    const fenced = await producer
      .transact({ topic: TX_TOPIC, tag: TAG, event: event(4) }, async () => 'never')
      .catch((e: unknown) => e);
    fenceNext = false;
    expect(fenced).toBeInstanceOf(TransactionFencedError);
    expect(await tx('fenced')).toBe(1);
    // The broker may also check a transaction whose EndTransaction it already got (seen here: the
    // rolled-back one of step 2 is then fenced too), so compare with every answer given.
    const fencedAnswers = answers.filter((a) => a.decidedBy === 'fenced');
    expect(fencedAnswers.map((a) => a.txId)).toContain((fenced as TransactionFencedError).txId);
    expect(fencedAnswers.every((a) => a.resolution === 'ROLLBACK')).toBe(true);
    expect(
      await sample(reg, 'rocketmq_tx_check_backs_total', {
        producer_group: GROUP,
        answer: 'rollback',
        decided_by: 'fenced',
      }),
    ).toBe(fencedAnswers.length);
    // Every answer the dispatcher gave is in the metric, with its decision.
    const checkBackSeries = (await reg.getSingleMetric('rocketmq_tx_check_backs_total')!.get()).values;
    expect(checkBackSeries.reduce((n, v) => n + v.value, 0)).toBe(producer.stats.checkBack.received);
    expect(
      await sample(
        reg,
        'rocketmq_tx_check_back_duration_seconds',
        { producer_group: GROUP, decided_by: 'fenced' },
        'rocketmq_tx_check_back_duration_seconds_count',
      ),
    ).toBe(fencedAnswers.length);

    // 5. Outbox delivery through the relay.
    const viaOutbox = await producer.transact({ topic: NORMAL, body: { run: RUN } }, async () => 'ok', {
      delivery: 'outbox',
    });
    expect(await tx('committed', 'outbox')).toBe(1);
    await relay.start();
    await waitFor(async () => (await outboxRow(ds, viaOutbox.eventIds[0]!))?.status === 'SENT', {
      timeoutMs: 60_000,
      description: 'the relay to deliver the outbox event',
    });
    const sent = await sample(reg, 'rocketmq_tx_relay_deliveries_total', { topic: NORMAL, result: 'sent' });
    expect(sent).toBeGreaterThanOrEqual(1);
    expect(sent).toBe(relay.stats.sent);

    // 6. The first event again under its eventId (a republish): the consumer acks it as a duplicate.
    await waitFor(() => applied.includes(first.eventId) && applied.includes(doubted.eventIds[0]!), {
      timeoutMs: 60_000,
      description: 'the consumer to apply both committed events',
    });
    const republisher = makeProducer(
      ds,
      { topics: [TX_TOPIC], producerGroup: `${GROUP}_republish` },
      {},
      { withoutOutbox: true },
    );
    extra.push(republisher);
    await republisher.start();
    await republisher.transact({ topic: TX_TOPIC, tag: TAG, event: first }, async () => 'again');
    const c = (outcome: string) =>
      sample(reg, 'rocketmq_tx_consumer_messages_total', {
        consumer_group: `it_metrics_c_${RUN}`,
        topic: TX_TOPIC,
        outcome,
      });
    await waitFor(async () => (await c('duplicate')) === 1, {
      timeoutMs: 60_000,
      description: 'the duplicate delivery to be counted',
    });
    expect(await c('applied')).toBe(2);
    expect(applied.filter((id) => id === first.eventId)).toHaveLength(1);
    const groupLabels = { consumer_group: `it_metrics_c_${RUN}`, topic: TX_TOPIC };
    expect(
      await sample(
        reg,
        'rocketmq_tx_consumer_lag_seconds',
        groupLabels,
        'rocketmq_tx_consumer_lag_seconds_count',
      ),
    ).toBe(2);
    // The lag of the check-back-committed event includes the seconds the broker took to ask.
    expect(
      await sample(
        reg,
        'rocketmq_tx_consumer_lag_seconds',
        groupLabels,
        'rocketmq_tx_consumer_lag_seconds_sum',
      ),
    ).toBeGreaterThan(1);
    expect(
      await sample(
        reg,
        'rocketmq_tx_consume_duration_seconds',
        { ...groupLabels, outcome: 'duplicate' },
        'rocketmq_tx_consume_duration_seconds_count',
      ),
    ).toBe(1);
  });

  it('the status gauges read the real rows of these topics at scrape time', async () => {
    const gauge = (name: string, labels: Labels = {}) => sample(reg, `rocketmq_tx_${name}`, labels);
    expect(await gauge('status_up')).toBe(1);
    for (const topic of [TX_TOPIC, NORMAL]) {
      for (const status of ['NEW', 'IN_FLIGHT', 'SENT', 'DEAD']) {
        // Rows move (confirmation batches, the relay): wait until a scrape and a count agree.
        await waitFor(
          async () =>
            (await gauge('outbox_events', { topic, status })) ===
            (await sqlCount(ds, 'SELECT COUNT(*) AS n FROM outbox_event WHERE topic = ? AND status = ?', [
              topic,
              status,
            ])),
          { timeoutMs: 30_000, description: `outbox_events{${topic},${status}} to match the table` },
        );
      }
    }
    expect(await gauge('outbox_events', { topic: TX_TOPIC, status: 'SENT' })).toBeGreaterThanOrEqual(2);
    expect(await gauge('tx_records', { status: 'ROLLED_BACK', resolved_by: 'CHECK_BACK' })).toBe(
      await sqlCount(
        ds,
        "SELECT COUNT(*) AS n FROM tx_record WHERE topic IN (?, ?) AND status = 'ROLLED_BACK' AND resolved_by = 'CHECK_BACK'",
        [TX_TOPIC, NORMAL],
      ),
    );
    expect(
      await gauge('tx_records', { status: 'ROLLED_BACK', resolved_by: 'CHECK_BACK' }),
    ).toBeGreaterThanOrEqual(1);
    expect(await gauge('consumed_events', { consumer_group: `it_metrics_c_${RUN}` })).toBe(
      await sqlCount(ds, 'SELECT COUNT(*) AS n FROM consumed_event WHERE consumer_group = ?', [
        `it_metrics_c_${RUN}`,
      ]),
    );
    // Two events applied; the duplicate wrote no row.
    expect(await gauge('consumed_events', { consumer_group: `it_metrics_c_${RUN}` })).toBe(2);
    // Everything of this run is delivered: nothing in doubt or undelivered on these topics.
    await waitFor(async () => (await gauge('in_doubt_transactions')) === 0, {
      timeoutMs: 30_000,
      description: 'no in-doubt transaction left on these topics',
    });
    await waitFor(async () => (await gauge('outbox_oldest_undelivered_age_seconds')) === 0, {
      timeoutMs: 30_000,
      description: 'no undelivered event left on these topics',
    });
    // The text exposition: steps 1 and 3 of the first test committed with transactional delivery.
    const text = await reg.metrics();
    expect(text).toMatch(/^rocketmq_tx_status_up 1$/m);
    expect(text).toMatch(
      new RegExp(
        `^rocketmq_tx_transactions_total\\{producer_group="${GROUP}",outcome="committed",delivery="transactional"\\} 2$`,
        'm',
      ),
    );
  });

  it('carries the active OpenTelemetry trace from transact() to the consumer', async () => {
    // The smallest AsyncLocalStorage context manager, as an OpenTelemetry SDK installs one.
    const als = new AsyncLocalStorage<otel.Context>();
    const manager: otel.ContextManager = {
      active: () => als.getStore() ?? otel.ROOT_CONTEXT,
      with: (ctx, fn, thisArg, ...args) => als.run(ctx, () => fn.apply(thisArg, args)),
      bind: (_ctx, target) => target,
      enable() {
        return this;
      },
      disable() {
        als.disable();
        return this;
      },
    };
    otel.context.setGlobalContextManager(manager);
    try {
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const span = otel.trace.wrapSpanContext({
        traceId,
        spanId: '00f067aa0ba902b7',
        traceFlags: otel.TraceFlags.SAMPLED,
      });
      const result = await otel.context.with(otel.trace.setSpan(otel.context.active(), span), () =>
        producer.transact(
          {
            topic: TX_TOPIC,
            tag: TAG,
            event: OrderPlaced.create({
              aggregateId: `m-${RUN}-traced`,
              aggregateVersion: 1,
              data: { n: 9 },
            }),
          },
          async () => 'ok',
        ),
      );
      const eventId = result.eventIds[0]!;
      await waitFor(() => traces.has(eventId), {
        timeoutMs: 60_000,
        description: 'the consumer to apply the traced event',
      });
      expect(traces.get(eventId)).toEqual({ traceId, traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
      // Without an active span: no trace id, no traceparent.
      const plain = await producer.transact(
        {
          topic: TX_TOPIC,
          tag: TAG,
          event: OrderPlaced.create({ aggregateId: `m-${RUN}-plain`, aggregateVersion: 1, data: { n: 10 } }),
        },
        async () => 'ok',
      );
      await waitFor(() => traces.has(plain.eventIds[0]!), {
        timeoutMs: 60_000,
        description: 'the consumer to apply the untraced event',
      });
      expect(traces.get(plain.eventIds[0]!)).toEqual({ traceId: null, traceparent: undefined });
    } finally {
      otel.context.disable();
    }
  });
});
