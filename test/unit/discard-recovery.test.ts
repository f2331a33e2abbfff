import type { EntityManager } from 'typeorm';
import { InvalidOptionError, TransactionalProducer } from '../../src';
import { DiscardRecovery, type DiscardRecoverySettings } from '../../src/relay/DiscardRecovery';
import { Observers } from '../../src/observability/observer';
import { noopLogger } from '../../src/util/logger';
import { FakeGateway, FakeStore, Journal, fakeDataSource } from './fakes/fakes';
import { FakeOutboxStore } from './fakes/outbox';

const SETTINGS: DiscardRecoverySettings = {
  horizonMs: 60_000,
  intervalMs: 1000,
  batchSize: 2,
  leaseMs: 30_000,
  backoff: { baseMs: 1000, maxDelayMs: 60_000, jitterMs: 0 },
};

async function inFlight(store: FakeOutboxStore, ...ids: string[]): Promise<void> {
  await store.insertEvents(
    {} as EntityManager,
    ids.map((eventId) => ({
      eventId,
      txId: `tx-${eventId}`,
      topic: 'orders',
      tag: 'created',
      keys: [eventId, 'order-1'],
      properties: { EVENT_ID: eventId, TX_ID: `tx-${eventId}`, TX_ORIGIN: 'g' },
      body: Buffer.from(`{"id":"${eventId}"}`),
      status: 'IN_FLIGHT' as const,
    })),
  );
}

function recoveryWith(store: FakeOutboxStore, gateway: FakeGateway, owner = 'a') {
  const events: string[] = [];
  const observers = new Observers();
  observers.add({ discardRecovery: (e) => events.push(e.result) });
  const recovery = new DiscardRecovery({
    settings: SETTINGS,
    store,
    gateway,
    producerGroup: 'g',
    topics: ['orders'],
    owner,
    requestTimeoutMs: 1000,
    logger: noopLogger,
    observers,
    random: () => 0,
  });
  return { recovery, events };
}

describe('DiscardRecovery (fakes)', () => {
  it('republishes an unconfirmed committed event past the horizon as the same message, half + commit, then SENT', async () => {
    const store = new FakeOutboxStore();
    const gateway = new FakeGateway(new Journal());
    await inFlight(store, 'e1');
    const { recovery, events } = recoveryWith(store, gateway);

    store.now = SETTINGS.horizonMs - 1;
    expect(await recovery.runOnce()).toBe(0);
    expect(gateway.sent).toHaveLength(0);

    store.now = SETTINGS.horizonMs;
    expect(await recovery.runOnce()).toBe(1);
    expect(gateway.sent).toEqual([
      {
        topic: 'orders',
        tag: 'created',
        keys: ['e1', 'order-1'],
        properties: { EVENT_ID: 'e1', TX_ID: 'tx-e1', TX_ORIGIN: 'g' },
        body: Buffer.from('{"id":"e1"}'),
      },
    ]);
    expect(gateway.ended).toEqual([{ messageId: 'm0', commit: true }]);
    expect(store.statuses.get('e1')).toBe('SENT');
    expect(recovery.stats).toMatchObject({ republished: 1, failed: 0 });
    expect(events).toEqual(['republished']);
    expect(await recovery.runOnce()).toBe(0);
  });

  it('a failed republish (EndTransaction lost) stays IN_FLIGHT, leased until its backoff, then is retried', async () => {
    const store = new FakeOutboxStore();
    const gateway = new FakeGateway(new Journal());
    gateway.failEnd = true;
    await inFlight(store, 'e1');
    const { recovery, events } = recoveryWith(store, gateway);
    store.now = SETTINGS.horizonMs;
    expect(await recovery.runOnce()).toBe(1);
    expect(store.statuses.get('e1')).toBe('IN_FLIGHT');
    expect(store.rows.get('e1')).toMatchObject({ attempts: 1, lastError: 'Error: end lost' });
    expect(store.rows.get('e1')!.leaseUntil).toBe(store.now + SETTINGS.backoff.baseMs);
    expect(await recovery.runOnce()).toBe(0);
    store.now += SETTINGS.backoff.baseMs;
    gateway.failEnd = false;
    expect(await recovery.runOnce()).toBe(1);
    expect(store.statuses.get('e1')).toBe('SENT');
    expect(events).toEqual(['retry', 'republished']);
  });

  it('two instances never lease the same event while the lease holds; a killed holder’s event is retaken after it', async () => {
    const store = new FakeOutboxStore();
    await inFlight(store, 'e1');
    store.now = SETTINGS.horizonMs;
    // Instance a leases e1 and dies before sending (its claim went through, nothing else).
    const a = await store.claimUnconfirmed({
      producerGroup: 'g',
      horizonMs: SETTINGS.horizonMs,
      limit: 10,
      leaseMs: SETTINGS.leaseMs,
      owner: 'a',
      topics: ['orders'],
    });
    expect(a.map((r) => r.eventId)).toEqual(['e1']);
    const gateway = new FakeGateway(new Journal());
    const { recovery } = recoveryWith(store, gateway, 'b');
    expect(await recovery.runOnce()).toBe(0);
    store.now += SETTINGS.leaseMs;
    expect(await recovery.runOnce()).toBe(1);
    expect(gateway.sent).toHaveLength(1);
    expect(store.statuses.get('e1')).toBe('SENT');
  });

  it('stop() waits for the round under way and schedules no more', async () => {
    const store = new FakeOutboxStore();
    const gateway = new FakeGateway(new Journal());
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const realEnd = gateway.endTransaction.bind(gateway);
    gateway.endTransaction = async (h, c) => {
      await gate;
      return realEnd(h, c);
    };
    await inFlight(store, 'e1');
    store.now = SETTINGS.horizonMs;
    const { recovery } = recoveryWith(store, gateway);
    const round = recovery.runOnce();
    let stopped = false;
    const stopping = recovery.stop().then(() => (stopped = true));
    recovery.start();
    await Promise.resolve();
    expect(stopped).toBe(false);
    release();
    await Promise.all([round, stopping]);
    expect(store.statuses.get('e1')).toBe('SENT');
  });
});

describe('TransactionalProducer discardRecovery option', () => {
  function producer(discardRecovery: unknown) {
    const journal = new Journal();
    return new TransactionalProducer(
      {
        endpoints: '127.0.0.1:8081',
        dataSource: fakeDataSource(journal),
        producerGroup: 'g',
        topics: ['t'],
        discardRecovery: discardRecovery as false,
      },
      {
        gateway: () => new FakeGateway(journal),
        store: new FakeStore(journal),
        outbox: new FakeOutboxStore(),
      },
    );
  }

  it('is on by default and off with false; stats say which', () => {
    expect(producer(undefined).stats.discardRecovery).toEqual({
      rounds: 0,
      republished: 0,
      failed: 0,
      storeErrors: 0,
    });
    expect(producer(true).stats.discardRecovery).not.toBeNull();
    expect(producer(false).stats.discardRecovery).toBeNull();
  });

  it('rejects bad settings, naming the option and the value', () => {
    expect(() => producer({ horizonMs: 10 })).toThrow(InvalidOptionError);
    expect(() => producer({ horizonMs: 10 })).toThrow(/discardRecovery\.horizonMs/);
    expect(() => producer({ intervalMS: 10 })).toThrow(/discardRecovery\.intervalMS/);
    expect(() => producer('yes')).toThrow(/discardRecovery/);
    expect(() => producer({ batchSize: 0 })).toThrow(/discardRecovery\.batchSize/);
  });
});
