import type { EntityManager } from 'typeorm';
import { InvalidOptionError, TransactionalProducer } from '../../src';
import type { ConsumerGateway, InboundMessage } from '../../src/broker/consumerGateway';
import { DeliveryObserver } from '../../src/producer/DeliveryObserver';
import { DiscardRecovery, type DiscardRecoverySettings } from '../../src/relay/DiscardRecovery';
import { Observers } from '../../src/observability/observer';
import { noopLogger } from '../../src/util/logger';
import { FakeGateway, FakeStore, Journal, fakeDataSource } from './fakes/fakes';
import { FakeOutboxStore } from './fakes/outbox';

/** A consumer gateway whose receive() hands out queued batches (or throws queued errors). */
class FakeConsumerGateway implements ConsumerGateway {
  readonly batches: Array<InboundMessage[] | Error> = [];
  readonly acked: string[] = [];
  started = false;
  shutdowns = 0;
  private wake: (() => void) | undefined;
  readonly maxDeliveryAttempts = undefined;

  async start(): Promise<void> {
    this.started = true;
  }
  async receive(): Promise<InboundMessage[]> {
    for (;;) {
      const next = this.batches.shift();
      if (next instanceof Error) throw next;
      if (next) return next;
      if (this.shutdowns > 0) throw new Error('client closed');
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
  push(batch: InboundMessage[] | Error): void {
    this.batches.push(batch);
    this.wake?.();
  }
  async ack(m: InboundMessage): Promise<void> {
    this.acked.push(m.messageId);
  }
  async retryLater(): Promise<void> {}
  async deadLetter(): Promise<void> {}
  async shutdown(): Promise<void> {
    this.shutdowns++;
    this.wake?.();
  }
}

function message(messageId: string, properties: Record<string, string>): InboundMessage {
  return { messageId, topic: 't', keys: [], properties, body: Buffer.alloc(0), deliveryAttempt: 1 };
}

/** Waits for `cond` (the observer's retry pause is a timer: polled, not counted in turns), 10 s at most. */
const until = async (cond: () => boolean): Promise<void> => {
  const deadline = Date.now() + 10_000;
  while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 1));
  expect(cond()).toBe(true);
};

describe('DeliveryObserver (confirmBy delivery)', () => {
  it("confirms this group's delivered events and transactions, ignores other groups', acks everything", async () => {
    const gateway = new FakeConsumerGateway();
    const events: string[] = [];
    const txs: string[] = [];
    const observer = new DeliveryObserver({
      gateway,
      producerGroup: 'g',
      onEvent: (id) => events.push(id),
      onTransaction: (id) => txs.push(id),
      logger: noopLogger,
    });
    await observer.start();
    expect(gateway.started).toBe(true);
    gateway.push([
      message('m1', { TX_ORIGIN: 'g', EVENT_ID: 'e1', TX_ID: 'tx1' }),
      message('m2', { TX_ORIGIN: 'other', EVENT_ID: 'e2', TX_ID: 'tx2' }),
      message('m3', { EVENT_ID: 'e3' }),
    ]);
    await until(() => gateway.acked.length === 3);
    expect(events).toEqual(['e1']);
    expect(txs).toEqual(['tx1']);
    expect(observer.stats).toEqual({ observed: 1, ignored: 2, errors: 0 });
    await observer.stop();
    expect(gateway.shutdowns).toBe(1);
  });

  it('a failed receive is counted and retried after a pause; stop() ends the pause', async () => {
    const gateway = new FakeConsumerGateway();
    const events: string[] = [];
    const observer = new DeliveryObserver({
      gateway,
      producerGroup: 'g',
      onEvent: (id) => events.push(id),
      onTransaction: () => undefined,
      logger: noopLogger,
      retryDelayMs: 5,
    });
    await observer.start();
    gateway.push(new Error('proxy unavailable'));
    gateway.push([message('m1', { TX_ORIGIN: 'g', EVENT_ID: 'e1', TX_ID: 'tx1' })]);
    await until(() => events.length === 1);
    expect(observer.stats.errors).toBe(1);
    gateway.push(new Error('again'));
    await until(() => observer.stats.errors === 2);
    await observer.stop();
    expect(gateway.shutdowns).toBe(1);
  });
});

describe('DiscardRecovery with awaitDelivery (confirmBy delivery)', () => {
  const SETTINGS: DiscardRecoverySettings = {
    horizonMs: 60_000,
    intervalMs: 1000,
    batchSize: 10,
    leaseMs: 30_000,
    backoff: { baseMs: 1000, maxDelayMs: 60_000, jitterMs: 0 },
  };

  it('an acknowledged republish stays IN_FLIGHT, leased for another horizon, and is republished again unless delivered', async () => {
    const store = new FakeOutboxStore();
    await store.insertEvents({} as EntityManager, [
      {
        eventId: 'e1',
        txId: 'tx1',
        topic: 'orders',
        keys: ['e1'],
        properties: { EVENT_ID: 'e1', TX_ID: 'tx1', TX_ORIGIN: 'g' },
        body: Buffer.from('{}'),
        status: 'IN_FLIGHT',
      },
    ]);
    const gateway = new FakeGateway(new Journal());
    const recovery = new DiscardRecovery({
      awaitDelivery: true,
      settings: SETTINGS,
      store,
      gateway,
      producerGroup: 'g',
      topics: ['orders'],
      owner: 'a',
      requestTimeoutMs: 1000,
      logger: noopLogger,
      observers: new Observers(),
      random: () => 0,
    });
    store.now = SETTINGS.horizonMs;
    expect(await recovery.runOnce()).toBe(1);
    expect(gateway.ended).toEqual([{ messageId: 'm0', commit: true }]);
    expect(store.statuses.get('e1')).toBe('IN_FLIGHT');
    expect(store.rows.get('e1')!.leaseUntil).toBe(store.now + SETTINGS.horizonMs);
    expect(recovery.stats).toMatchObject({ republished: 1, failed: 0 });
    expect(await recovery.runOnce()).toBe(0);
    // Not delivered within another horizon: sent again.
    store.now += SETTINGS.horizonMs;
    expect(await recovery.runOnce()).toBe(1);
    expect(gateway.sent).toHaveLength(2);
    // Delivered: the observer's confirmation marks it SENT, nothing more is sent.
    await store.markConfirmed(['e1']);
    store.now += SETTINGS.horizonMs;
    expect(await recovery.runOnce()).toBe(0);
    expect(gateway.sent).toHaveLength(2);
  });
});

describe('TransactionalProducer confirmBy', () => {
  function setup(confirmBy: unknown) {
    const journal = new Journal();
    const store = new FakeStore(journal);
    const outbox = new FakeOutboxStore();
    const consumer = new FakeConsumerGateway();
    const producer = new TransactionalProducer(
      {
        endpoints: '127.0.0.1:8081',
        dataSource: fakeDataSource(journal),
        producerGroup: 'g',
        topics: ['t'],
        confirmBy: confirmBy as 'delivery',
      },
      { gateway: () => new FakeGateway(journal), store, outbox, consumerGateway: () => consumer },
    );
    return { producer, store, outbox, consumer };
  }

  it('rejects a bad value, naming the option and the values it takes', () => {
    expect(() => setup('ack')).toThrow(InvalidOptionError);
    expect(() => setup('ack')).toThrow(/confirmBy.*"endTransaction" or "delivery"/);
  });

  it("'endTransaction' (default): the proxy's acknowledged commit confirms; no confirmation consumer", async () => {
    const { producer, store, outbox, consumer } = setup(undefined);
    await producer.start();
    const out = await producer.transact({ topic: 't', body: {} }, async () => undefined);
    await producer.shutdown();
    expect(consumer.started).toBe(false);
    expect(producer.stats.deliveryConfirmations).toBeNull();
    expect(store.confirmed).toEqual([out.txId]);
    expect(outbox.statuses.get(out.eventIds[0]!)).toBe('SENT');
  });

  it("'delivery': an acknowledged commit alone confirms nothing (shutdown flushes confirmations: none)", async () => {
    const { producer, store, outbox } = setup('delivery');
    await producer.start();
    const out = await producer.transact({ topic: 't', body: {} }, async () => undefined);
    await producer.shutdown();
    expect(outbox.statuses.get(out.eventIds[0]!)).toBe('IN_FLIGHT');
    expect(store.confirmed).toEqual([]);
  });

  it("'delivery': the event is confirmed when its message is delivered", async () => {
    const { producer, store, outbox, consumer } = setup('delivery');
    await producer.start();
    expect(consumer.started).toBe(true);
    const out = await producer.transact({ topic: 't', body: {} }, async () => undefined);
    const eventId = out.eventIds[0]!;
    expect(outbox.statuses.get(eventId)).toBe('IN_FLIGHT');
    consumer.push([message('m0', { TX_ORIGIN: 'g', EVENT_ID: eventId, TX_ID: out.txId })]);
    await until(() => consumer.acked.length === 1);
    await producer.shutdown();
    expect(consumer.shutdowns).toBe(1);
    expect(outbox.statuses.get(eventId)).toBe('SENT');
    expect(store.confirmed).toEqual([out.txId]);
    expect(producer.stats.deliveryConfirmations).toEqual({ observed: 1, ignored: 0, errors: 0 });
  });
});
