import type { DataSource, EntityManager } from 'typeorm';
import { Registry } from 'prom-client';
import {
  IdempotentConsumer,
  InvalidOptionError,
  MissingDependencyError,
  OutboxRelay,
  RocketMqTxMetrics,
  StoreError,
  TransactionalProducer,
  TransactionResolution,
  createEnvelope,
  uuidv7,
  type IdempotentConsumerOptions,
} from '../../src';
import type { ConsumerGateway, InboundMessage } from '../../src/broker/consumerGateway';
import type { ConsumedRow, InboxStore, InboxTransaction } from '../../src/store/ports';
import type { CheckBackMessage } from '../../src/checkback/resolution';
import { Observers } from '../../src/observability/observer';
import type { ClaimedOutboxEvent, NewOutboxEvent, OutboxStore } from '../../src/store/ports';
import { FakeGateway, FakeStore, Journal, LongPolls, fakeDataSource } from './fakes/fakes';

type Labels = Record<string, string>;

async function values(reg: Registry, name: string): Promise<Array<{ labels: Labels; value: number }>> {
  const metric = reg.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const got = await metric.get();
  return got.values.map((v) => ({ labels: v.labels as Labels, value: v.value }));
}

/** The value of the series with exactly these labels (0 when absent); `_count` etc. via metricName. */
async function value(reg: Registry, name: string, labels: Labels = {}, metricName?: string): Promise<number> {
  const metric = reg.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const got = await metric.get();
  const hit = got.values.find(
    (v) =>
      (metricName === undefined || (v as { metricName?: string }).metricName === metricName) &&
      Object.keys(labels).every((k) => (v.labels as Labels)[k] === labels[k]) &&
      Object.keys(v.labels).filter((k) => k !== 'le').length === Object.keys(labels).length,
  );
  return hit ? hit.value : 0;
}

function producerWith(store = new FakeStore(new Journal()), gateway = new FakeGateway(new Journal())) {
  const journal = new Journal();
  const producer = new TransactionalProducer(
    {
      endpoints: '127.0.0.1:8081',
      dataSource: fakeDataSource(journal),
      producerGroup: 'orders',
      topics: ['orders_tx'],
    },
    { gateway: () => gateway, store, outbox: null },
  );
  return { producer, store, gateway };
}

function checkBack(txId: string | undefined, origin = 'orders', eventId?: string): CheckBackMessage {
  return {
    messageId: `cb-${uuidv7()}`,
    topic: 'orders_tx',
    ...(txId !== undefined ? { txId } : {}),
    origin,
    properties: eventId ? { EVENT_ID: eventId } : {},
  } as unknown as CheckBackMessage;
}

describe('RocketMqTxMetrics: producer metrics (fake broker and store)', () => {
  it('counts transactions by outcome and delivery, with a duration histogram per outcome', async () => {
    const reg = new Registry();
    const metrics = new RocketMqTxMetrics({ register: reg });
    const { producer, store } = producerWith();
    metrics.attach(producer);
    await producer.start();
    const ev = { topic: 'orders_tx', body: 'x' };

    await producer.transact(ev, async () => 1);
    await producer.transact(ev, async () => 2);
    const userStoreError = new StoreError('the business table is locked');
    await expect(
      producer.transact(ev, async () => {
        throw userStoreError;
      }),
    ).rejects.toBe(userStoreError);
    await expect(
      producer.transact(ev, async () => {
        throw 'a string';
      }),
    ).rejects.toBe('a string');
    store.fenceFirst = true;
    await expect(producer.transact(ev, async () => 3)).rejects.toMatchObject({ code: 'TRANSACTION_FENCED' });
    store.fenceFirst = false;
    store.insertError = new Error('table missing');
    await expect(producer.transact(ev, async () => 4)).rejects.toMatchObject({ code: 'STORE_ERROR' });
    store.insertError = undefined;

    const t = (outcome: string) =>
      value(reg, 'rocketmq_tx_transactions_total', {
        producer_group: 'orders',
        outcome,
        delivery: 'transactional',
      });
    expect(await t('committed')).toBe(2);
    // A StoreError thrown by `work` is the user's rollback, not an SDK failure.
    expect(await t('rolled_back')).toBe(2);
    expect(await t('fenced')).toBe(1);
    expect(await t('failed')).toBe(1);
    expect(await t('outcome_unknown')).toBe(0);
    expect(
      await value(
        reg,
        'rocketmq_tx_transaction_duration_seconds',
        { producer_group: 'orders', outcome: 'committed' },
        'rocketmq_tx_transaction_duration_seconds_count',
      ),
    ).toBe(2);
    await producer.shutdown();
  });

  it('counts an ambiguous COMMIT as outcome_unknown and a lost EndTransaction', async () => {
    const reg = new Registry();
    const metrics = new RocketMqTxMetrics({ register: reg });
    const journal = new Journal();
    const gateway = new FakeGateway(journal);
    const producer = new TransactionalProducer(
      {
        endpoints: '127.0.0.1:8081',
        dataSource: fakeDataSource(journal, { commitError: new Error('connection lost') }),
        producerGroup: 'orders',
        topics: ['orders_tx'],
      },
      { gateway: () => gateway, store: new FakeStore(journal), outbox: null },
    );
    metrics.attach(producer);
    await producer.start();
    await expect(producer.transact({ topic: 'orders_tx', body: 'x' }, async () => 1)).rejects.toMatchObject({
      code: 'TRANSACTION_OUTCOME_UNKNOWN',
    });
    expect(
      await value(reg, 'rocketmq_tx_transactions_total', {
        producer_group: 'orders',
        outcome: 'outcome_unknown',
        delivery: 'transactional',
      }),
    ).toBe(1);

    const ok = producerWith(undefined, new FakeGateway(new Journal()));
    ok.gateway.failEnd = true;
    metrics.attach(ok.producer);
    await ok.producer.start();
    await ok.producer.transact({ topic: 'orders_tx', body: 'y' }, async () => 1);
    expect(await value(reg, 'rocketmq_tx_end_transaction_failures_total', { producer_group: 'orders' })).toBe(
      1,
    );
    await Promise.all([producer.shutdown(), ok.producer.shutdown()]);
  });

  it('counts check-backs by answer and by how they were decided', async () => {
    const reg = new Registry();
    const metrics = new RocketMqTxMetrics({ register: reg });
    const seen: unknown[] = [];
    const store = new FakeStore(new Journal());
    const gateway = new FakeGateway(new Journal());
    const producer = new TransactionalProducer(
      {
        endpoints: '127.0.0.1:8081',
        dataSource: fakeDataSource(new Journal()),
        producerGroup: 'orders',
        topics: ['orders_tx'],
        checkBack: { onResolved: (o) => seen.push(o) },
      },
      {
        gateway: (config) => {
          gateway.config = config;
          return gateway;
        },
        store,
        outbox: null,
      },
    );
    metrics.attach(producer);
    await producer.start();
    const ask = gateway.config!.onCheckBack!;
    const committed = await producer.transact({ topic: 'orders_tx', body: 'x' }, async () => 1);

    expect(await ask(checkBack(committed.txId))).toBe(TransactionResolution.COMMIT);
    const never = uuidv7();
    expect(await ask(checkBack(never))).toBe(TransactionResolution.ROLLBACK); // tombstone
    expect(await ask(checkBack(never))).toBe(TransactionResolution.ROLLBACK); // now the row is found
    expect(await ask(checkBack(uuidv7(), 'billing'))).toBe(TransactionResolution.UNKNOWN);
    expect(await ask(checkBack('not-a-uuid'))).toBe(TransactionResolution.UNKNOWN);
    expect(await ask(checkBack(uuidv7(), 'orders', 'bad-event-id'))).toBe(TransactionResolution.UNKNOWN);
    expect(await ask(checkBack(undefined))).toBe(TransactionResolution.UNKNOWN);
    store.insertTombstone = async () => ({
      kind: 'UNDECIDED',
      reason: 'LOCK_WAIT_TIMEOUT',
      error: new Error('1205'),
    });
    expect(await ask(checkBack(uuidv7()))).toBe(TransactionResolution.UNKNOWN);
    store.insertTombstone = async () => ({
      kind: 'UNDECIDED',
      reason: 'DATABASE_ERROR',
      error: new Error('gone'),
    });
    expect(await ask(checkBack(uuidv7()))).toBe(TransactionResolution.UNKNOWN);

    const cb = (answer: string, decided_by: string) =>
      value(reg, 'rocketmq_tx_check_backs_total', { producer_group: 'orders', answer, decided_by });
    expect(await cb('commit', 'row_found')).toBe(1);
    expect(await cb('rollback', 'fenced')).toBe(1);
    expect(await cb('rollback', 'row_found')).toBe(1);
    expect(await cb('unknown', 'foreign_origin')).toBe(1);
    expect(await cb('unknown', 'malformed')).toBe(2);
    expect(await cb('unknown', 'no_tx_id')).toBe(1);
    expect(await cb('unknown', 'lock_timeout')).toBe(1);
    expect(await cb('unknown', 'error')).toBe(1);
    const total = (await values(reg, 'rocketmq_tx_check_backs_total')).reduce((n, v) => n + v.value, 0);
    expect(total).toBe(9);
    // The user's onResolved still runs, and now says how each answer was decided.
    expect(seen).toHaveLength(9);
    expect(seen[1]).toMatchObject({ resolution: 'ROLLBACK', decidedBy: 'fenced', txId: never });
    await producer.shutdown();
  });

  it('a custom resolver is counted as custom_resolver, one that throws as error', async () => {
    const reg = new Registry();
    const metrics = new RocketMqTxMetrics({ register: reg });
    const gateway = new FakeGateway(new Journal());
    let fail = false;
    const producer = new TransactionalProducer(
      {
        endpoints: '127.0.0.1:8081',
        dataSource: fakeDataSource(new Journal()),
        producerGroup: 'orders',
        topics: ['orders_tx'],
        checkBack: {
          resolver: {
            resolve: async () => {
              if (fail) throw new Error('order table unreachable');
              return TransactionResolution.COMMIT;
            },
          },
        },
      },
      {
        gateway: (config) => {
          gateway.config = config;
          return gateway;
        },
        store: new FakeStore(new Journal()),
        outbox: null,
      },
    );
    metrics.attach(producer);
    await producer.start();
    await gateway.config!.onCheckBack!(checkBack(undefined));
    fail = true;
    await gateway.config!.onCheckBack!(checkBack(undefined));
    const cb = (answer: string, decided_by: string) =>
      value(reg, 'rocketmq_tx_check_backs_total', { producer_group: 'orders', answer, decided_by });
    expect(await cb('commit', 'custom_resolver')).toBe(1);
    expect(await cb('unknown', 'error')).toBe(1);
    await producer.shutdown();
  });

  it('attach is idempotent, detach stops counting, and an unattached producer adds nothing', async () => {
    const reg = new Registry();
    const metrics = new RocketMqTxMetrics({ register: reg });
    const { producer } = producerWith();
    const other = producerWith();
    const detach = metrics.attach(producer);
    expect(metrics.attach(producer)).toBe(detach);
    await Promise.all([producer.start(), other.producer.start()]);
    const ev = { topic: 'orders_tx', body: 'x' };
    await producer.transact(ev, async () => 1);
    await other.producer.transact(ev, async () => 1);
    detach();
    await producer.transact(ev, async () => 1);
    expect(
      await value(reg, 'rocketmq_tx_transactions_total', {
        producer_group: 'orders',
        outcome: 'committed',
        delivery: 'transactional',
      }),
    ).toBe(1);
    await Promise.all([producer.shutdown(), other.producer.shutdown()]);
  });
});

/** An outbox store whose rows a test moves by hand. */
class ScriptedOutbox implements OutboxStore {
  rows: ClaimedOutboxEvent[] = [];
  promote = 0;
  async insertEvents(_m: EntityManager, _e: readonly NewOutboxEvent[]): Promise<void> {}
  async markConfirmed(): Promise<void> {}
  async claim(): Promise<ClaimedOutboxEvent[]> {
    return this.rows.splice(0);
  }
  async markSent(): Promise<void> {}
  async markSentMany(): Promise<void> {}
  async markFailed(): Promise<void> {}
  async promoteUnconfirmed(): Promise<number> {
    return this.promote;
  }
  async replayDead(): Promise<number> {
    return 0;
  }
  async claimUnconfirmed(): Promise<ClaimedOutboxEvent[]> {
    return [];
  }
  async releaseUnconfirmed(): Promise<void> {}
}

function claimed(topic: string, attempts = 0): ClaimedOutboxEvent {
  const id = uuidv7();
  return {
    eventId: id,
    txId: uuidv7(),
    topic,
    keys: [id],
    properties: { EVENT_ID: id },
    body: Buffer.from('{}'),
    attempts,
  };
}

describe('RocketMqTxMetrics: relay metrics (fakes)', () => {
  it('counts sent, retry and dead per topic, and republished events', async () => {
    const reg = new Registry();
    const metrics = new RocketMqTxMetrics({ register: reg });
    const store = new ScriptedOutbox();
    const gateway = new FakeGateway(new Journal());
    const relay = new OutboxRelay(
      {
        endpoints: '127.0.0.1:8081',
        dataSource: {
          isInitialized: true,
          options: { type: 'mysql' },
          createQueryRunner: () => undefined,
        } as unknown as DataSource,
        topics: ['a', 'b'],
        maxAttempts: 3,
      },
      { store, gateway: () => gateway, random: () => 0 },
    );
    metrics.attach(relay);
    store.rows = [claimed('a'), claimed('a'), claimed('b')];
    await relay.runOnce();
    gateway.send = () => Promise.reject(new Error('refused'));
    store.rows = [claimed('a', 0), claimed('b', 2)];
    await relay.runOnce();
    store.promote = 4;
    await relay.reconcileDiscarded();

    const d = (topic: string, result: string) =>
      value(reg, 'rocketmq_tx_relay_deliveries_total', { topic, result });
    expect(await d('a', 'sent')).toBe(2);
    expect(await d('b', 'sent')).toBe(1);
    expect(await d('a', 'retry')).toBe(1);
    expect(await d('b', 'dead')).toBe(1);
    expect(await value(reg, 'rocketmq_tx_relay_republished_total')).toBe(4);
    expect(relay.stats).toMatchObject({ sent: 3, failed: 1, dead: 1, republished: 4 });
  });
});

/** consumed_event in memory; transactions serialized, as the row locks serialize the real ones. */
class ScriptedInbox implements InboxStore {
  consumed = new Set<string>();
  private lock: Promise<unknown> = Promise.resolve();
  isConflict(): boolean {
    return false;
  }
  transaction<T>(fn: (tx: InboxTransaction) => Promise<{ commit: boolean; value: T }>): Promise<T> {
    const run = this.lock.then(() => this.run(fn));
    this.lock = run.catch(() => undefined);
    return run;
  }
  private async run<T>(fn: (tx: InboxTransaction) => Promise<{ commit: boolean; value: T }>): Promise<T> {
    const staged = new Set(this.consumed);
    const out = await fn({
      manager: {} as EntityManager,
      insertConsumed: async (r: ConsumedRow) => {
        if (staged.has(r.eventId)) return false;
        staged.add(r.eventId);
        return true;
      },
      markOutcome: async () => undefined,
      lockCursor: async () => 0,
      advanceCursor: async () => undefined,
      claimVersion: async () => 0,
    });
    if (out.commit) this.consumed = staged;
    return out.value;
  }
}

class QueueGateway implements ConsumerGateway {
  queue: InboundMessage[] = [];
  settled: string[] = [];
  maxDeliveryAttempts: number | undefined = 2;
  private readonly polls = new LongPolls(200);
  async start(): Promise<void> {}
  push(m: InboundMessage): void {
    this.queue.push(m);
    this.polls.wakeAll();
  }
  /** A long poll: what is queued, else waits for a push or the poll's end. */
  async receive(max: number): Promise<InboundMessage[]> {
    if (this.queue.length === 0) await this.polls.wait();
    return this.queue.splice(0, max);
  }
  async ack(m: InboundMessage): Promise<void> {
    this.settled.push(`ack:${m.messageId}`);
  }
  async retryLater(m: InboundMessage): Promise<void> {
    this.settled.push(`retry:${m.messageId}`);
  }
  async deadLetter(m: InboundMessage): Promise<void> {
    this.settled.push(`dlq:${m.messageId}`);
  }
  async shutdown(): Promise<void> {
    this.polls.wakeAll();
  }
}

describe('RocketMqTxMetrics: consumer metrics (fakes)', () => {
  it('counts outcomes and dead letters per group and topic; lag from occurredAt for applied events only', async () => {
    const reg = new Registry();
    const metrics = new RocketMqTxMetrics({ register: reg, lagBuckets: [1, 60, 3600] });
    const gateway = new QueueGateway();
    const consumer = new IdempotentConsumer(
      {
        endpoints: '127.0.0.1:8081',
        dataSource: {
          createQueryRunner: () => ({}),
          isInitialized: true,
          options: { type: 'mysql' },
        } as unknown as IdempotentConsumerOptions['dataSource'],
        consumerGroup: 'inventory',
        subscriptions: ['orders'],
        handlers: [
          {
            eventType: 'OrderPlaced',
            eventVersion: 1,
            handle: async (e) => {
              if (e.aggregateId === 'bad') throw new Error('boom');
            },
          },
        ],
        retry: { initialDelayMs: 100, maxDelayMs: 400 },
      },
      { gateway: () => gateway, store: new ScriptedInbox() },
    );
    metrics.attach(consumer);
    await consumer.start();
    const env = (aggregateId: string, occurredAt: Date) =>
      createEnvelope({
        eventType: 'OrderPlaced',
        eventVersion: 1,
        aggregateType: 'Order',
        aggregateId,
        aggregateVersion: 1,
        data: {},
        occurredAt,
      });
    const msg = (id: string, body: unknown, attempt = 1): InboundMessage => ({
      messageId: id,
      topic: 'orders',
      keys: [],
      properties: {},
      body: Buffer.from(JSON.stringify(body)),
      deliveryAttempt: attempt,
    });
    // Applied 2 minutes after it occurred: lands in the (60, 3600] bucket.
    const late = env('o1', new Date(Date.now() - 120_000));
    gateway.push(msg('m1', late));
    gateway.push(msg('m2', late)); // duplicate
    gateway.push(msg('m3', env('bad', new Date()), 1)); // handler fails, retried
    gateway.push(msg('m4', env('bad', new Date()), 2)); // last attempt: dead-lettered
    gateway.push(msg('m5', 'not an envelope')); // malformed: dead-lettered at once
    for (let i = 0; i < 1000 && gateway.settled.length < 5; i++) await new Promise((r) => setImmediate(r));
    expect(gateway.settled).toHaveLength(5);

    const m = (outcome: string) =>
      value(reg, 'rocketmq_tx_consumer_messages_total', {
        consumer_group: 'inventory',
        topic: 'orders',
        outcome,
      });
    expect(await m('applied')).toBe(1);
    expect(await m('duplicate')).toBe(1);
    expect(await m('handler_failed')).toBe(2);
    expect(await m('malformed')).toBe(1);
    const dl = (outcome: string) =>
      value(reg, 'rocketmq_tx_consumer_dead_letters_total', {
        consumer_group: 'inventory',
        topic: 'orders',
        outcome,
      });
    expect(await dl('handler_failed')).toBe(1);
    expect(await dl('malformed')).toBe(1);
    const lag = await values(reg, 'rocketmq_tx_consumer_lag_seconds');
    const bucket = (le: number) => lag.find((v) => v.labels.le === (le as unknown as string))?.value;
    expect(lag.find((v) => (v as { labels: Labels }).labels.le === undefined && v.value > 0)).toBeDefined();
    expect(bucket(60)).toBe(0);
    expect(bucket(3600)).toBe(1);
    const count = await value(
      reg,
      'rocketmq_tx_consumer_lag_seconds',
      { consumer_group: 'inventory', topic: 'orders' },
      'rocketmq_tx_consumer_lag_seconds_count',
    );
    expect(count).toBe(1);
    expect(
      await value(
        reg,
        'rocketmq_tx_consume_duration_seconds',
        { consumer_group: 'inventory', topic: 'orders', outcome: 'applied' },
        'rocketmq_tx_consume_duration_seconds_count',
      ),
    ).toBe(1);
    await consumer.shutdown();
  });
});

/** A DataSource whose status queries answer from canned rows, or hang, or fail. */
function statusDs(mode: { hang?: boolean; fail?: boolean; inDoubt?: number } = {}) {
  const calls = { n: 0 };
  const ds = {
    options: { type: 'mariadb' },
    isInitialized: true,
    createQueryRunner: () => ({}),
    query: async (sql: string) => {
      calls.n++;
      if (mode.hang) return new Promise(() => undefined);
      if (mode.fail) throw new Error('ECONNREFUSED');
      if (sql.includes('FROM tx_record')) return [{ status: 'ROLLED_BACK', resolved_by: 'CHECK_BACK', n: 3 }];
      if (sql.includes('FROM consumed_event')) return [{ consumer_group: 'g1', outcome: 'APPLIED', n: 7 }];
      return [
        { k: 'count', topic: 'a', status: 'NEW', n: 2, age_us: null, txs: null },
        { k: 'count', topic: 'a', status: 'DEAD', n: 1, age_us: null, txs: null },
        { k: 'pending', topic: 'a', status: 'NEW', n: 2, age_us: 4_500_000, txs: null },
        {
          k: 'in_doubt',
          topic: null,
          status: null,
          n: mode.inDoubt ?? 0,
          age_us: 1_000_000,
          txs: mode.inDoubt ?? 0,
        },
      ];
    },
  };
  return { ds: ds as unknown as DataSource, calls };
}

describe('RocketMqTxMetrics: status gauges read at scrape time', () => {
  it('sets the gauges from one snapshot per scrape, reused within cacheMs', async () => {
    const reg = new Registry();
    const { ds, calls } = statusDs({ inDoubt: 2 });
    new RocketMqTxMetrics({ register: reg, status: { dataSource: ds, topics: ['a', 'z'], cacheMs: 60_000 } });
    const text = await reg.metrics();
    expect(calls.n).toBe(3); // one statement per table, shared by every gauge
    expect(text).toContain('rocketmq_tx_status_up 1');
    expect(text).toContain('rocketmq_tx_in_doubt_transactions 2');
    expect(text).toContain('rocketmq_tx_in_doubt_oldest_age_seconds 1');
    expect(text).toContain('rocketmq_tx_outbox_oldest_undelivered_age_seconds 4.5');
    expect(text).toContain('rocketmq_tx_outbox_events{topic="a",status="NEW"} 2');
    expect(text).toContain('rocketmq_tx_outbox_events{topic="a",status="DEAD"} 1');
    // A filtered topic without rows is reported as zeros, not left out.
    expect(text).toContain('rocketmq_tx_outbox_events{topic="z",status="NEW"} 0');
    expect(text).toContain('rocketmq_tx_tx_records{status="ROLLED_BACK",resolved_by="CHECK_BACK"} 3');
    expect(text).toContain('rocketmq_tx_tx_records{status="COMMITTED",resolved_by="PRODUCER"} 0');
    expect(text).toContain('rocketmq_tx_consumed_events{consumer_group="g1"} 7');
    await reg.metrics();
    expect(calls.n).toBe(3);
  });

  it('a database that hangs never hangs the scrape: status_up 0, a timeout counted, no stale values', async () => {
    const reg = new Registry();
    const { ds, calls } = statusDs({ hang: true });
    new RocketMqTxMetrics({ register: reg, status: { dataSource: ds, cacheMs: 0, timeoutMs: 50 } });
    const text = await reg.metrics();
    expect(text).toContain('rocketmq_tx_status_up 0');
    expect(text).toContain('rocketmq_tx_status_errors_total{reason="timeout"} 1');
    // Unknown (prom-client writes NaN as "Nan"), not a stale value or a made-up 0.
    expect(text).toMatch(/^rocketmq_tx_in_doubt_transactions nan$/im);
    expect(text).toMatch(/^rocketmq_tx_outbox_oldest_undelivered_age_seconds nan$/im);
    expect(text).not.toMatch(/^rocketmq_tx_outbox_events\{/m);
    // The hanging query is not started again by the next scrape.
    await reg.metrics();
    expect(calls.n).toBe(3);
  });

  it('a failing database: status_up 0 and an error counted; the next scrape tries again', async () => {
    const reg = new Registry();
    const { ds, calls } = statusDs({ fail: true });
    const logged: string[] = [];
    new RocketMqTxMetrics({
      register: reg,
      status: { dataSource: ds, cacheMs: 0 },
      logger: {
        debug: () => undefined,
        info: () => undefined,
        warn: (_f, m) => logged.push(m),
        error: () => undefined,
      },
    });
    const text = await reg.metrics();
    expect(text).toContain('rocketmq_tx_status_up 0');
    expect(text).toContain('rocketmq_tx_status_errors_total{reason="error"} 1');
    expect(logged).toEqual(['status snapshot failed']);
    await reg.metrics();
    expect(calls.n).toBe(6);
  });

  it('without `status` no database gauge is registered', async () => {
    const reg = new Registry();
    new RocketMqTxMetrics({ register: reg });
    expect(reg.getSingleMetric('rocketmq_tx_status_up')).toBeUndefined();
    expect(reg.getSingleMetric('rocketmq_tx_transactions_total')).toBeDefined();
  });
});

describe('RocketMqTxMetrics: options and wiring', () => {
  it('every metric name follows the conventions: rocketmq_tx_ prefix, _total counters, _seconds units', async () => {
    const reg = new Registry();
    const { ds } = statusDs();
    new RocketMqTxMetrics({ register: reg, status: { dataSource: ds } });
    const all = await reg.getMetricsAsJSON();
    expect(all.length).toBeGreaterThanOrEqual(20);
    for (const m of all) {
      expect(m.name).toMatch(/^rocketmq_tx_[a-z_]+$/);
      const type = String(m.type);
      if (type === 'counter') expect(m.name).toMatch(/_total$/);
      else expect(m.name).not.toMatch(/_total$/);
      if (type === 'histogram') expect(m.name).toMatch(/_seconds$/);
      expect(m.help.length).toBeGreaterThan(10);
    }
  });

  it('uses the default registry when none is given, and refuses a second instance on one registry', async () => {
    const { register } = await import('prom-client');
    register.clear();
    new RocketMqTxMetrics();
    expect(register.getSingleMetric('rocketmq_tx_transactions_total')).toBeDefined();
    expect(() => new RocketMqTxMetrics()).toThrow(/one RocketMqTxMetrics per registry/);
    register.clear();
  });

  it.each([
    [{ register: {} }, 'register'],
    [{ colour: 1 }, 'options.colour'],
    [{ durationBuckets: [1, 0.5] }, 'durationBuckets'],
    [{ lagBuckets: [] }, 'lagBuckets'],
    [{ status: { dataSource: {} } }, 'status.dataSource'],
    [{ status: { dataSource: statusDs().ds, cacheMs: -1 } }, 'status.cacheMs'],
    [{ status: { dataSource: statusDs().ds, timeoutMs: 1e9 } }, 'status.timeoutMs'],
    [{ status: { dataSource: statusDs().ds, topics: ['bad topic'] } }, 'status.topics[0]'],
    [{ status: { dataSource: statusDs().ds, every: 1 } }, 'status.every'],
  ])('rejects %j naming %s', (options, option) => {
    let err: unknown;
    try {
      new RocketMqTxMetrics({ register: new Registry(), ...options } as never);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidOptionError);
    expect((err as InvalidOptionError).option).toBe(option);
  });

  it('attach refuses something that is not a component', () => {
    const metrics = new RocketMqTxMetrics({ register: new Registry() });
    expect(() => metrics.attach({} as never)).toThrow(InvalidOptionError);
  });

  it('an observer that throws is ignored by the component', () => {
    const obs = new Observers();
    const got: number[] = [];
    obs.add({
      relayRepublished: () => {
        throw new Error('bug in a metric');
      },
    });
    obs.add({ relayRepublished: (e) => got.push(e.count) });
    expect(() => obs.emit('relayRepublished', { count: 3 })).not.toThrow();
    expect(got).toEqual([3]);
  });
});

describe('without prom-client installed', () => {
  afterEach(() => jest.resetModules());

  it('the SDK still imports and works; RocketMqTxMetrics throws MissingDependencyError naming the package', async () => {
    jest.resetModules();
    jest.doMock('prom-client', () => {
      throw Object.assign(
        new Error("Cannot find module 'prom-client' from 'src/observability/optional.ts'"),
        {
          code: 'MODULE_NOT_FOUND',
        },
      );
    });
    const sdk = (await import('../../src')) as typeof import('../../src');
    const journal = new Journal();
    const producer = new sdk.TransactionalProducer(
      { endpoints: '127.0.0.1:8081', dataSource: fakeDataSource(journal), producerGroup: 'g', topics: ['t'] },
      { gateway: () => new FakeGateway(journal), store: new FakeStore(journal), outbox: null },
    );
    await producer.start();
    await expect(producer.transact({ topic: 't', body: 1 }, async () => 'ok')).resolves.toMatchObject({
      result: 'ok',
    });
    await producer.shutdown();
    let err: unknown;
    try {
      new sdk.RocketMqTxMetrics();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(sdk.MissingDependencyError);
    expect(err).toMatchObject({ code: 'MISSING_DEPENDENCY', packageName: 'prom-client', retriable: false });
    expect((err as Error).message).toBe(
      'RocketMqTxMetrics needs the package prom-client: npm install prom-client',
    );
    expect(MissingDependencyError).not.toBe(sdk.MissingDependencyError); // a fresh module graph
  });
});
