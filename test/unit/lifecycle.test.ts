import type { DataSource, EntityManager } from 'typeorm';
import {
  ConsumerNotRunningError,
  IdempotentConsumer,
  NotRunningError,
  OutboxRelay,
  ProducerNotRunningError,
  RelayNotRunningError,
  RocketMqTxError,
  TransactionalProducer,
} from '../../src';
import type { BrokerGateway, HalfMessage, OutgoingMessage } from '../../src/broker/gateway';
import type { ConsumerGateway, InboundMessage } from '../../src/broker/consumerGateway';
import type { ClaimedOutboxEvent } from '../../src/store/ports';
import type { InboxStore } from '../../src/store/ports';
import { FakeStore, Journal, LongPolls, fakeDataSource } from './fakes/fakes';
import { FakeOutboxStore } from './fakes/outbox';

/**
 * The lifecycle races of issue 13 item 5, run the same way against producer, consumer and relay
 * over fakes: concurrent start(), shutdown() during start(), a second shutdown() waiting for the
 * first, and shutdown() bounded by one shutdownTimeoutMs budget when every await hangs.
 */

const never = <T>(): Promise<T> => new Promise<T>(() => undefined);

/** A held promise: `wait()` resolves once `release()` is called. */
class Gate {
  private opened = false;
  private readonly waiters: Array<() => void> = [];
  wait(): Promise<void> {
    if (this.opened) return Promise.resolve();
    return new Promise((r) => this.waiters.push(r));
  }
  release(): void {
    this.opened = true;
    for (const w of this.waiters.splice(0)) w();
  }
}

/** Both broker ports; start() and shutdown() can be held or hung, and are counted. */
class LifeGateway implements BrokerGateway, ConsumerGateway {
  starts = 0;
  shutdowns = 0;
  receives = 0;
  startGate: Gate | undefined;
  hangShutdown = false;
  hangSettle = false;
  queue: InboundMessage[] = [];
  readonly order: string[] = [];
  readonly maxDeliveryAttempts = 3;
  private closed = false;
  private readonly polls = new LongPolls(50);

  async start(): Promise<void> {
    this.starts++;
    await this.startGate?.wait();
  }
  async shutdown(): Promise<void> {
    this.shutdowns++;
    this.order.push('gateway.shutdown');
    this.closed = true;
    this.polls.wakeAll();
    if (this.hangShutdown) await never();
  }
  async sendHalf(m: OutgoingMessage): Promise<HalfMessage> {
    return { messageId: `m-${m.keys[0] ?? 'x'}`, topic: m.topic };
  }
  async endTransaction(): Promise<void> {}
  async send(): Promise<{ messageId: string }> {
    return { messageId: 'n' };
  }
  async receive(max: number): Promise<InboundMessage[]> {
    this.receives++;
    // A long poll: open until a push or its end, like the proxy's.
    if (this.queue.length === 0 && !this.closed) await this.polls.wait();
    return this.queue.splice(0, max);
  }
  push(m: InboundMessage): void {
    this.queue.push(m);
    this.polls.wakeAll();
  }
  async ack(): Promise<void> {}
  async retryLater(): Promise<void> {}
  async deadLetter(): Promise<void> {
    if (this.hangSettle) await never();
  }
}

/** A relay store whose claim() can be held or hung. */
class RelayStore extends FakeOutboxStore {
  claims = 0;
  claimGate: Gate | undefined;
  onClaim: (() => void) | undefined;
  override async claim(): Promise<ClaimedOutboxEvent[]> {
    this.claims++;
    this.onClaim?.();
    await this.claimGate?.wait();
    return [];
  }
}

interface Harness {
  component: 'producer' | 'consumer' | 'relay';
  notRunning: new (message: string) => RocketMqTxError;
  gateway: LifeGateway;
  start(): Promise<void>;
  shutdown(): Promise<void>;
  /** Background work the component did on its own (polls, claims, recovery rounds). */
  activity(): number;
  /** Puts one unit of work in flight that finishes only after `gate` opens (never, if omitted). */
  busy(gate?: Gate): Promise<void>;
  /** Makes the flush of shutdown hang too, where the component has one. */
  hangFlush(): Promise<void>;
  stats(): Record<string, unknown>;
}

const SHUTDOWN_MS = 1000;

function producerHarness(): Harness {
  const gateway = new LifeGateway();
  const journal = new Journal();
  const store = new FakeStore(journal);
  const outbox = new RecoveryOutbox();
  const producer = new TransactionalProducer(
    {
      endpoints: '127.0.0.1:8081',
      dataSource: fakeDataSource(journal),
      producerGroup: 'orders',
      topics: ['t'],
      shutdownTimeoutMs: SHUTDOWN_MS,
      discardRecovery: { intervalMs: 100 },
    },
    { gateway: () => gateway, store, outbox },
  );
  return {
    component: 'producer',
    notRunning: ProducerNotRunningError,
    gateway,
    start: () => producer.start(),
    shutdown: () => producer.shutdown(),
    stats: () => producer.stats as unknown as Record<string, unknown>,
    activity: () => outbox.rounds,
    async busy(gate) {
      void producer
        .transact({ topic: 't', body: Buffer.from('x') }, () => (gate ? gate.wait() : never()))
        .catch(() => undefined);
      await until(() => journal.events.includes('db.insert'));
    },
    async hangFlush() {
      // A committed transaction leaves a confirmation for shutdown to flush; its write hangs.
      store.markConfirmed = () => never();
      outbox.markConfirmed = () => never();
      await producer.transact({ topic: 't', body: Buffer.from('y') }, async () => undefined);
    },
  };
}

/** Counts discard-recovery rounds (the producer's only background work). */
class RecoveryOutbox extends FakeOutboxStore {
  rounds = 0;
  override async claimUnconfirmed(
    ...args: Parameters<FakeOutboxStore['claimUnconfirmed']>
  ): Promise<ClaimedOutboxEvent[]> {
    this.rounds++;
    return super.claimUnconfirmed(...args);
  }
}

function consumerHarness(): Harness {
  const gateway = new LifeGateway();
  const inbox = { isConflict: () => false } as unknown as InboxStore;
  const consumer = new IdempotentConsumer(
    {
      endpoints: '127.0.0.1:8081',
      dataSource: { isInitialized: true, createQueryRunner: () => ({}) } as unknown as DataSource,
      consumerGroup: 'g',
      subscriptions: ['t'],
      handlers: [{ eventType: 'E', eventVersion: 1, handle: async () => undefined }],
      shutdownTimeoutMs: SHUTDOWN_MS,
    },
    { gateway: () => gateway, store: inbox },
  );
  let n = 0;
  return {
    component: 'consumer',
    notRunning: ConsumerNotRunningError,
    gateway,
    start: () => consumer.start(),
    shutdown: () => consumer.shutdown(),
    stats: () => consumer.stats as unknown as Record<string, unknown>,
    activity: () => gateway.receives,
    async busy(gate) {
      // A malformed body is dead-lettered; the dead-letter call is the in-flight work.
      const settle = gateway.deadLetter.bind(gateway);
      gateway.deadLetter = async () => {
        await (gate ? gate.wait() : never());
        return settle();
      };
      gateway.push({
        messageId: `bad-${n++}`,
        topic: 't',
        keys: [],
        properties: {},
        body: Buffer.from('not json'),
        deliveryAttempt: 1,
      });
      await until(() => consumer.stats.received > 0);
    },
    async hangFlush() {
      // The consumer has no flush of its own.
    },
  };
}

function relayHarness(): Harness {
  const gateway = new LifeGateway();
  const store = new RelayStore();
  const relay = new OutboxRelay(
    {
      endpoints: '127.0.0.1:8081',
      dataSource: { isInitialized: true, createQueryRunner: () => ({}) } as unknown as DataSource,
      topics: ['t'],
      shutdownTimeoutMs: SHUTDOWN_MS,
      pollIntervalMs: 10,
      reconcileDiscarded: false,
    },
    { gateway: () => gateway, store, txStatus: { readStatus: async () => null } as never },
  );
  return {
    component: 'relay',
    notRunning: RelayNotRunningError,
    gateway,
    start: () => relay.start(),
    shutdown: () => relay.shutdown(),
    stats: () => relay.stats as unknown as Record<string, unknown>,
    activity: () => store.claims,
    async busy(gate) {
      const claimed = new Promise<void>((r) => (store.onClaim = r));
      store.claimGate = gate ?? new Gate();
      await claimed;
    },
    async hangFlush() {
      // The relay's flush only holds check-back confirmations; none here.
    },
  };
}

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setImmediate(r));
  if (!cond()) throw new Error('condition not reached');
}

/** Whether `p` settled, after letting every queued callback run. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  return done;
}

const harnesses: Array<[string, () => Harness]> = [
  ['TransactionalProducer', producerHarness],
  ['IdempotentConsumer', consumerHarness],
  ['OutboxRelay', relayHarness],
];

describe.each(harnesses)('%s lifecycle (fakes)', (_name, make) => {
  afterEach(() => jest.useRealTimers());

  it('two concurrent start() calls open the client once and get the same promise', async () => {
    const h = make();
    h.gateway.startGate = new Gate();
    const first = h.start();
    const second = h.start();
    expect(second).toBe(first);
    h.gateway.startGate.release();
    await Promise.all([first, second]);
    await h.start();
    expect(h.gateway.starts).toBe(1);
    await h.shutdown();
    expect(h.gateway.shutdowns).toBe(1);
  });

  it('shutdown() during start() ends stopped: client closed, no background work, start() refused', async () => {
    const h = make();
    h.gateway.startGate = new Gate();
    const started = h.start();
    const stopped = h.shutdown();
    h.gateway.startGate.release();
    await started;
    await stopped;
    expect(h.gateway).toMatchObject({ starts: 1, shutdowns: 1 });
    // Give any loop wrongly started a chance to run before looking.
    await settled(Promise.resolve());
    expect(h.activity()).toBe(0);
    const err = await h.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(h.notRunning);
    expect(err).toMatchObject({ component: h.component, retriable: false });
    expect(h.gateway.starts).toBe(1);
  });

  it('a second shutdown() gets the same promise, settled only after the first one closed the client', async () => {
    const h = make();
    await h.start();
    const gate = new Gate();
    await h.busy(gate);
    const first = h.shutdown();
    const second = h.shutdown();
    expect(second).toBe(first);
    void second.then(() => h.gateway.order.push('second shutdown settled'));
    expect(await settled(second)).toBe(false);
    gate.release();
    await Promise.all([first, second]);
    expect(h.gateway.order).toEqual(['gateway.shutdown', 'second shutdown settled']);
    expect(h.gateway.shutdowns).toBe(1);
  });

  it('every await of shutdown() hangs (work, flush, client close): it ends within ONE shutdownTimeoutMs', async () => {
    const h = make();
    await h.start();
    await h.hangFlush();
    await h.busy();
    h.gateway.hangShutdown = true;
    // A logical clock from here on: shutdown's timers (and performance.now) advance only when told.
    jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick'] });
    const stopped = h.shutdown();
    expect(await settled(stopped)).toBe(false);
    // The steps share one deadline: the whole budget, not one budget per step.
    await jest.advanceTimersByTimeAsync(SHUTDOWN_MS);
    expect(await settled(stopped)).toBe(true);
    expect(h.gateway.shutdowns).toBe(1);
  });

  it('a start() that outlasts the shutdown budget: shutdown() still ends in time, the client is closed once it opens', async () => {
    jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick'] });
    const h = make();
    h.gateway.startGate = new Gate();
    const started = h.start();
    const stopped = h.shutdown();
    await jest.advanceTimersByTimeAsync(SHUTDOWN_MS);
    expect(await settled(stopped)).toBe(true);
    h.gateway.startGate.release();
    await started;
    await until(() => h.gateway.shutdowns === 1);
    await settled(Promise.resolve());
    expect(h.activity()).toBe(0);
    await expect(h.start()).rejects.toBeInstanceOf(h.notRunning);
  });
});

describe.each(harnesses)('%s stats', (_name, make) => {
  it('stats is a copy: each read is a new object, and changing it (nested too) changes nothing', () => {
    const h = make();
    const first = h.stats();
    const second = h.stats();
    expect(second).not.toBe(first);
    expect(second).toEqual(first);
    for (const [key, value] of Object.entries(first)) {
      if (typeof value === 'number') first[key] = value + 99;
      else if (value && typeof value === 'object') {
        expect(value).not.toBe(second[key]);
        for (const k of Object.keys(value)) (value as Record<string, unknown>)[k] = 99;
      }
    }
    expect(h.stats()).toEqual(second);
  });
});

describe('NotRunningError', () => {
  it('each component error is a NotRunningError naming its component, with its own stable code', () => {
    const cases = [
      [new ProducerNotRunningError('x'), 'producer', 'PRODUCER_NOT_RUNNING'],
      [new ConsumerNotRunningError('x'), 'consumer', 'CONSUMER_NOT_RUNNING'],
      [new RelayNotRunningError('x'), 'relay', 'RELAY_NOT_RUNNING'],
    ] as const;
    for (const [err, component, code] of cases) {
      expect(err).toBeInstanceOf(NotRunningError);
      expect(err).toBeInstanceOf(RocketMqTxError);
      expect(err).toMatchObject({ component, code, retriable: false });
    }
  });

  it('producer onOutcome: one call per transact, committed or with the error; a throwing hook is logged', async () => {
    const journal = new Journal();
    const outcomes: Array<Record<string, unknown>> = [];
    const warnings: string[] = [];
    const producer = new TransactionalProducer(
      {
        endpoints: '127.0.0.1:8081',
        dataSource: fakeDataSource(journal),
        producerGroup: 'g',
        topics: ['t'],
        logger: {
          debug: () => undefined,
          info: () => undefined,
          error: () => undefined,
          warn: (_f, m) => warnings.push(m),
        },
        onOutcome: (o) => {
          outcomes.push({ ...o });
          throw new Error('hook bug');
        },
      },
      { gateway: () => new LifeGateway(), store: new FakeStore(journal), outbox: null },
    );
    await producer.start();
    const done = await producer.transact({ topic: 't', body: Buffer.from('x') }, async () => 'ok');
    const boom = new Error('work failed');
    await expect(
      producer.transact({ topic: 't', body: Buffer.from('x') }, async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    await producer.shutdown();
    expect(outcomes).toEqual([
      expect.objectContaining({ txId: done.txId, outcome: 'committed', delivery: 'transactional' }),
      expect.objectContaining({ outcome: 'rolled_back', error: boom }),
    ]);
    expect(outcomes[0]).not.toHaveProperty('error');
    expect(warnings.filter((w) => w === 'onOutcome hook threw')).toHaveLength(2);
  });

  it('transact before start names the producer', async () => {
    const journal = new Journal();
    const producer = new TransactionalProducer(
      { endpoints: '127.0.0.1:8081', dataSource: fakeDataSource(journal), producerGroup: 'g', topics: ['t'] },
      { gateway: () => new LifeGateway(), store: new FakeStore(journal), outbox: null },
    );
    const work = async (_m: EntityManager) => undefined;
    await expect(producer.transact({ topic: 't', body: Buffer.from('x') }, work)).rejects.toMatchObject({
      component: 'producer',
      code: 'PRODUCER_NOT_RUNNING',
    });
  });
});
