import type { DataSource, EntityManager } from 'typeorm';
import {
  InvalidOptionError,
  noopLogger,
  OutboxRelay,
  TransactionalProducer,
  TransactionResolution,
} from '../../src';
import type { GatewayConfig } from '../../src/broker/gateway';
import type { NewOutboxEvent } from '../../src/store/ports';
import { FakeOutboxStore } from './fakes/outbox';
import { FakeGateway, FakeStore, Journal, fakeDataSource } from './fakes/fakes';
import { waitFor } from '../helpers/env';

const relayDs = {
  isInitialized: true,
  options: { type: 'mysql' },
  transaction: () => undefined,
  createQueryRunner: () => undefined,
} as unknown as DataSource;

function row(eventId: string, topic: string, extra: Partial<NewOutboxEvent> = {}): NewOutboxEvent {
  return {
    eventId,
    txId: 'tx-1',
    topic,
    keys: [eventId],
    properties: { EVENT_ID: eventId, TX_ID: 'tx-1' },
    body: Buffer.from('{}'),
    status: 'NEW',
    ...extra,
  };
}

function relayWith(store: FakeOutboxStore, gateway: FakeGateway, extra: Record<string, unknown> = {}) {
  return new OutboxRelay(
    {
      endpoints: '127.0.0.1:8081',
      dataSource: relayDs,
      topics: ['normal', 'tx', 'fifo'],
      transactionTopics: ['tx'],
      fifoTopics: ['fifo'],
      ...extra,
    },
    { store, gateway: () => gateway, random: () => 0 },
  );
}

/** A gateway whose sends wait until release(); pending() counts the sends begun. */
function blockedGateway() {
  const gateway = new FakeGateway(new Journal());
  const send = gateway.send.bind(gateway);
  let release!: () => void;
  const blocked = new Promise<void>((resolve) => (release = resolve));
  let begun = 0;
  gateway.send = async (m) => {
    begun++;
    await blocked;
    return send(m);
  };
  return { gateway, release, pending: () => begun };
}

describe('OutboxRelay (fakes)', () => {
  it('sends a normal topic plainly, a TRANSACTION topic as half + immediate commit, FIFO with messageGroup = aggregateId', async () => {
    const store = new FakeOutboxStore();
    const gateway = new FakeGateway(new Journal());
    await store.insertEvents({} as EntityManager, [
      row('e1', 'normal'),
      row('e2', 'tx'),
      row('e3', 'fifo', { aggregateId: 'order-7' }),
    ]);
    const relay = relayWith(store, gateway);
    expect(await relay.runOnce()).toBe(3);
    expect(gateway.ended).toEqual([{ messageId: 'm0', commit: true }]);
    const fifo = gateway.sent.find((m) => m.topic === 'fifo')!;
    expect(fifo.messageGroup).toBe('order-7');
    expect(gateway.sent.find((m) => m.topic === 'normal')!.messageGroup).toBeUndefined();
    expect([...store.statuses.values()]).toEqual(['SENT', 'SENT', 'SENT']);
    expect(relay.stats).toMatchObject({ claimed: 3, sent: 3, dead: 0 });
  });

  it('retries a poison event with backoff and ends it DEAD with its last error after maxAttempts, never SENT', async () => {
    const store = new FakeOutboxStore();
    const gateway = new FakeGateway(new Journal());
    gateway.send = () => Promise.reject(new Error('topic refused'));
    await store.insertEvents({} as EntityManager, [row('p1', 'normal')]);
    const relay = relayWith(store, gateway, {
      maxAttempts: 3,
      backoff: { baseMs: 10, maxDelayMs: 1000, jitterMs: 0 },
    });
    const delays: number[] = [];
    for (let i = 0; i < 3; i++) {
      store.now += 10_000;
      expect(await relay.runOnce()).toBe(1);
      delays.push(store.rows.get('p1')!.dueAt - store.now);
    }
    store.now += 10_000;
    expect(await relay.runOnce()).toBe(0);
    expect(store.statuses.get('p1')).toBe('DEAD');
    expect(store.rows.get('p1')).toMatchObject({ attempts: 3, lastError: 'Error: topic refused' });
    expect(delays.slice(0, 2)).toEqual([10, 20]);
    expect(relay.stats).toMatchObject({ failed: 2, dead: 1, sent: 0 });
    expect(await relay.replayDead()).toBe(1);
    expect(store.statuses.get('p1')).toBe('NEW');
  });

  it('answers a check-back from tx_record (COMMIT / ROLLBACK), UNKNOWN for no row, a read error or a foreign id; never writes', async () => {
    const rows = new Map<string, 'COMMITTED' | 'ROLLED_BACK'>([
      ['0190a5b8-7c4e-7a00-8000-000000000001', 'COMMITTED'],
      ['0190a5b8-7c4e-7a00-8000-000000000002', 'ROLLED_BACK'],
    ]);
    const broken = '0190a5b8-7c4e-7a00-8000-000000000004';
    const reads: string[] = [];
    let config: GatewayConfig | undefined;
    new OutboxRelay(
      { endpoints: '127.0.0.1:8081', dataSource: relayDs, topics: ['tx'], transactionTopics: ['tx'] },
      {
        store: new FakeOutboxStore(),
        gateway: (c) => ((config = c), new FakeGateway(new Journal())),
        txStatus: {
          readStatus: async (txId) => {
            reads.push(txId);
            if (txId === broken) throw new Error('connection lost');
            return rows.get(txId);
          },
        },
      },
    );
    const ask = (txId: string | undefined) =>
      config!.onCheckBack!({
        messageId: 'm',
        topic: 'tx',
        keys: [],
        properties: {},
        body: Buffer.alloc(0),
        ...(txId !== undefined ? { txId } : {}),
      });
    expect(await ask('0190a5b8-7c4e-7a00-8000-000000000001')).toBe(TransactionResolution.COMMIT);
    expect(await ask('0190a5b8-7c4e-7a00-8000-000000000002')).toBe(TransactionResolution.ROLLBACK);
    expect(await ask('0190a5b8-7c4e-7a00-8000-000000000003')).toBe(TransactionResolution.UNKNOWN);
    expect(await ask(broken)).toBe(TransactionResolution.UNKNOWN);
    expect(await ask('not-a-uuid')).toBe(TransactionResolution.UNKNOWN);
    expect(await ask(undefined)).toBe(TransactionResolution.UNKNOWN);
    expect(reads).toHaveLength(4);
  });

  it.each([
    [1, 1],
    [2, 2],
  ])(
    'with batchesInFlight %i, %i claims are taken while the first batch is still being sent; shutdown waits for every batch to be marked',
    async (batchesInFlight, claimsWhileBlocked) => {
      const store = new FakeOutboxStore();
      await store.insertEvents(
        {} as EntityManager,
        ['a', 'b', 'c', 'd', 'e'].map((id) => row(id, 'normal')),
      );
      let claims = 0;
      const claim = store.claim.bind(store);
      store.claim = (o) => (claims++, claim(o));
      const { gateway, release, pending } = blockedGateway();
      const relay = relayWith(store, gateway, {
        batchSize: 2,
        batchesInFlight,
        pollIntervalMs: 10,
        reconcileDiscarded: false,
      });
      await relay.start();
      await waitFor(() => pending() === 2 * claimsWhileBlocked, {
        intervalMs: 5,
        description: 'sends in flight',
      });
      // Give the loop room to claim more than it may; it must not.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(claims).toBe(claimsWhileBlocked);
      expect(pending()).toBe(2 * claimsWhileBlocked);
      release();
      await waitFor(() => relay.stats.sent === 5, { intervalMs: 5, description: 'all five sent' });
      await relay.shutdown();
      expect([...store.statuses.values()]).toEqual(['SENT', 'SENT', 'SENT', 'SENT', 'SENT']);
      expect(relay.stats).toMatchObject({ claimed: 5, sent: 5, failed: 0 });
    },
  );

  it('shutdown during a blocked batch waits for it to be sent and marked', async () => {
    const store = new FakeOutboxStore();
    await store.insertEvents({} as EntityManager, [row('x', 'normal'), row('y', 'normal')]);
    const { gateway, release, pending } = blockedGateway();
    const relay = relayWith(store, gateway, { batchSize: 1, batchesInFlight: 2, reconcileDiscarded: false });
    await relay.start();
    await waitFor(() => pending() === 2, { intervalMs: 5, description: 'two batches in flight' });
    const stopped = relay.shutdown();
    setTimeout(release, 20);
    await stopped;
    expect([...store.statuses.values()]).toEqual(['SENT', 'SENT']);
  });

  it('validates its options, naming the option', () => {
    const store = new FakeOutboxStore();
    const gateway = new FakeGateway(new Journal());
    expect(() => relayWith(store, gateway, { batchSize: 0 })).toThrow(InvalidOptionError);
    expect(() => relayWith(store, gateway, { batchesInFlight: 0 })).toThrow(/batchesInFlight/);
    expect(() => relayWith(store, gateway, { batchesInFlight: 17 })).toThrow(/from 1 to 16/);
    expect(() => relayWith(store, gateway, { batchesInFlight: 1.5 })).toThrow(/batchesInFlight/);
    expect(() => relayWith(store, gateway, { fifoTopics: ['elsewhere'] })).toThrow(/fifoTopics\[0\]/);
    expect(() => relayWith(store, gateway, { backoff: { baseMs: 10, maxDelayMs: 5 } })).toThrow(
      /backoff.maxDelayMs/,
    );
    expect(() => relayWith(store, gateway, { leaseMS: 10 })).toThrow(/options.leaseMS/);
  });

  it('retry is a RetryPolicy; backoff stays accepted as its older name (baseMs), not both at once', () => {
    const store = new FakeOutboxStore();
    const gateway = new FakeGateway(new Journal());
    const policy = (extra: Record<string, unknown>) =>
      (relayWith(store, gateway, extra) as unknown as { options: { retry: unknown } }).options.retry;
    expect(policy({})).toEqual({ initialDelayMs: 1000, maxDelayMs: 300_000, jitterMs: 1000 });
    expect(policy({ retry: { initialDelayMs: 50, maxDelayMs: 400 } })).toEqual({
      initialDelayMs: 50,
      maxDelayMs: 400,
      jitterMs: 1000,
    });
    expect(policy({ backoff: { baseMs: 50, maxDelayMs: 400, jitterMs: 0 } })).toEqual({
      initialDelayMs: 50,
      maxDelayMs: 400,
      jitterMs: 0,
    });
    const both = () => relayWith(store, gateway, { retry: { initialDelayMs: 1 }, backoff: { baseMs: 1 } });
    expect(both).toThrow(InvalidOptionError);
    expect(both).toThrow(/Invalid option backoff:/);
    expect(() => relayWith(store, gateway, { retry: { baseMs: 1 } })).toThrow(/retry\.baseMs/);
    expect(() => relayWith(store, gateway, { onOutcome: 'x' })).toThrow(/Invalid option onOutcome/);
  });

  it('onOutcome sees each delivery (sent, retry with its delay, dead) after the counters; a throwing hook is logged', async () => {
    const store = new FakeOutboxStore();
    await store.insertEvents({} as EntityManager, [row('ok', 'normal'), row('bad', 'normal')]);
    const gateway = new FakeGateway(new Journal());
    const send = gateway.send.bind(gateway);
    gateway.send = async (m) => {
      if (m.keys[0] === 'bad') throw new Error('refused');
      return send(m);
    };
    const outcomes: unknown[] = [];
    const warnings: string[] = [];
    const logger = { ...noopLogger, warn: (_f: object, msg: string) => warnings.push(msg) };
    const relay = relayWith(store, gateway, {
      logger,
      maxAttempts: 2,
      retry: { initialDelayMs: 100, maxDelayMs: 100, jitterMs: 0 },
      onOutcome: (o: { result: string }) => {
        outcomes.push({ ...o, stats: relay.stats });
        if (o.result === 'dead') throw new Error('hook bug');
      },
    });
    await relay.runOnce();
    store.now += 1000;
    await relay.runOnce();
    expect(outcomes).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ eventId: 'ok', result: 'sent', attempts: 1 }),
        expect.objectContaining({ eventId: 'bad', result: 'retry', attempts: 1, retryInMs: 100 }),
        expect.objectContaining({
          eventId: 'bad',
          result: 'dead',
          attempts: 2,
          stats: expect.objectContaining({ dead: 1 }),
        }),
      ]),
    );
    expect(outcomes).toHaveLength(3);
    expect(relay.stats).toMatchObject({ sent: 1, failed: 1, dead: 1 });
    expect(warnings).toContain('onOutcome hook threw');
  });
});

describe('TransactionalProducer outbox rows (fakes)', () => {
  async function producerWith(extra: Record<string, unknown> = {}) {
    const journal = new Journal();
    const gateway = new FakeGateway(journal);
    const outbox = new FakeOutboxStore();
    const producer = new TransactionalProducer(
      {
        endpoints: '127.0.0.1:8081',
        dataSource: fakeDataSource(journal),
        producerGroup: 'g',
        topics: ['t'],
        ...extra,
      },
      { gateway: () => gateway, store: new FakeStore(journal), outbox },
    );
    await producer.start();
    return { producer, gateway, outbox };
  }

  it('transactional delivery writes IN_FLIGHT rows and marks them SENT once EndTransaction is acknowledged', async () => {
    const { producer, gateway, outbox } = await producerWith();
    const r = await producer.transact(
      [
        { topic: 't', body: 'a' },
        { topic: 't', body: 'b' },
      ],
      async () => 1,
    );
    expect(r.delivery).toBe('transactional');
    expect(gateway.ended).toHaveLength(2);
    expect(r.eventIds.map((id) => outbox.rows.get(id)!.status)).toEqual(['IN_FLIGHT', 'IN_FLIGHT']);
    await producer.shutdown();
    expect(r.eventIds.map((id) => outbox.statuses.get(id))).toEqual(['SENT', 'SENT']);
  });

  it('outbox delivery (per call) sends no half message and writes NEW rows with the exact message', async () => {
    const { producer, gateway, outbox } = await producerWith();
    const r = await producer.transact({ topic: 't', tag: 'x', body: { n: 1 } }, async () => 1, {
      delivery: 'outbox',
    });
    expect(gateway.sent).toHaveLength(0);
    expect(r).toMatchObject({ delivery: 'outbox', messageIds: [] });
    const stored = outbox.rows.get(r.eventIds[0]!)!;
    expect(stored).toMatchObject({ status: 'NEW', topic: 't', tag: 'x', keys: [r.eventIds[0]] });
    expect(stored.properties).toMatchObject({ TX_ID: r.txId, EVENT_ID: r.eventIds[0], TX_ORIGIN: 'g' });
    expect(stored.body.toString()).toBe('{"n":1}');
    await producer.shutdown();
  });

  it('with outboxFallback, a broker outage commits the events as NEW rows instead of failing', async () => {
    const { producer, gateway, outbox } = await producerWith({ outboxFallback: true });
    gateway.failSendAt = 0;
    const r = await producer.transact({ topic: 't', body: 'a' }, async () => 1);
    expect(r.delivery).toBe('outbox');
    expect(outbox.rows.get(r.eventIds[0]!)!.status).toBe('NEW');
    expect(producer.stats.outboxFallbacks).toBe(1);
    await producer.shutdown();
  });

  it('rejects an unknown delivery mode, naming the option', async () => {
    const { producer } = await producerWith();
    await expect(
      producer.transact({ topic: 't', body: 'a' }, async () => 1, { delivery: 'later' as never }),
    ).rejects.toThrow(/Invalid option delivery/);
    expect(
      () =>
        new TransactionalProducer({
          endpoints: '127.0.0.1:8081',
          dataSource: fakeDataSource(new Journal()),
          producerGroup: 'g',
          topics: ['t'],
          delivery: 'x' as never,
        }),
    ).toThrow(InvalidOptionError);
    await producer.shutdown();
  });
});
