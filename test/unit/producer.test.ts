import {
  BrokerUnavailableError,
  InvalidMessageError,
  InvalidOptionError,
  ProducerNotRunningError,
  StoreError,
  TransactionalProducer,
  TransactionFencedError,
  TransactionOutcomeUnknownError,
} from '../../src';
import { FakeGateway, FakeStore, Journal, fakeDataSource, type FakeDbControl } from './fakes/fakes';

function setup(control: FakeDbControl = {}) {
  const journal = new Journal();
  const gateway = new FakeGateway(journal);
  const store = new FakeStore(journal);
  const producer = new TransactionalProducer(
    {
      endpoints: '127.0.0.1:8081',
      dataSource: fakeDataSource(journal, control),
      producerGroup: 'orders',
      topics: ['orders_tx'],
    },
    { gateway: () => gateway, store },
  );
  return { journal, gateway, store, producer };
}

describe('TransactionalProducer state machine (fake broker and store)', () => {
  it('commit path: half first, tx_record first in the transaction, EndTransaction(COMMIT) after COMMIT', async () => {
    const { journal, producer, store, gateway } = setup();
    await producer.start();
    const seen: unknown[] = [];
    const out = await producer.transact({ topic: 'orders_tx', body: { id: 1 } }, async (manager) => {
      journal.add('work');
      seen.push(manager);
      return 42;
    });
    expect(out.result).toBe(42);
    expect(out.messageIds).toEqual(['m0']);
    expect(journal.events).toEqual([
      'gateway.start',
      'half#0',
      'db.connect',
      'db.begin',
      'db.insert',
      'work',
      'db.commit',
      'db.release',
      'end.commit:m0',
    ]);
    expect(seen[0]).toEqual({ marker: 'manager' });
    expect(gateway.sent[0]!.properties).toMatchObject({
      TX_ID: out.txId,
      TX_ORIGIN: 'orders',
      EVENT_ID: out.eventIds[0],
    });
    expect(gateway.sent[0]!.keys[0]).toBe(out.eventIds[0]);
    await producer.shutdown();
    expect(store.confirmed).toEqual([out.txId]);
  });

  it('work throws: local rollback, EndTransaction(ROLLBACK), the same error object rethrown', async () => {
    const { journal, producer, store } = setup();
    await producer.start();
    const boom = new Error('business rule');
    await expect(
      producer.transact({ topic: 'orders_tx', body: 'x' }, async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(journal.events.slice(-4)).toEqual(['db.insert', 'db.rollback', 'db.release', 'end.rollback:m0']);
    expect(producer.stats.rolledBack).toBe(1);
    await producer.shutdown();
    expect(store.confirmed).toEqual([]);
  });

  it('fenced by a check-back: TransactionFencedError, work never runs, message rolled back', async () => {
    const { journal, producer, store } = setup();
    store.fenceFirst = true;
    await producer.start();
    const work = jest.fn();
    const err = await producer.transact({ topic: 'orders_tx', body: 'x' }, work).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransactionFencedError);
    expect((err as TransactionFencedError).retriable).toBe(true);
    expect((err as TransactionFencedError).code).toBe('TRANSACTION_FENCED');
    expect(work).not.toHaveBeenCalled();
    expect(journal.events).toContain('end.rollback:m0');
    expect(journal.events).not.toContain('db.commit');
  });

  it('ambiguous COMMIT: TransactionOutcomeUnknownError and no EndTransaction at all', async () => {
    const cause = new Error('Connection lost: The server closed the connection.');
    const { journal, producer } = setup({ commitError: cause });
    await producer.start();
    const err = await producer
      .transact({ topic: 'orders_tx', body: 'x' }, async () => 1)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransactionOutcomeUnknownError);
    expect((err as Error).cause).toBe(cause);
    expect(journal.events.filter((e) => e.startsWith('end.'))).toEqual([]);
  });

  it('half send fails: BrokerUnavailableError, no database work; the halves already sent are rolled back', async () => {
    const { journal, producer, gateway } = setup();
    gateway.failSendAt = 1;
    await producer.start();
    const work = jest.fn();
    const err = await producer
      .transact(
        [
          { topic: 'orders_tx', body: 'a' },
          { topic: 'orders_tx', body: 'b' },
        ],
        work,
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokerUnavailableError);
    expect((err as BrokerUnavailableError).retriable).toBe(true);
    expect(work).not.toHaveBeenCalled();
    expect(journal.events.some((e) => e.startsWith('db.'))).toBe(false);
    expect(journal.events).toContain('end.rollback:m0');
  });

  it('several events share one txId and one fence row, one half message each', async () => {
    const { producer, gateway, journal } = setup();
    await producer.start();
    const out = await producer.transact(
      [
        { topic: 'orders_tx', body: 'a', tag: 'created' },
        { topic: 'orders_tx', body: 'b', keys: ['order-1'] },
      ],
      async () => 'ok',
    );
    expect(gateway.sent.map((m) => m.properties.TX_ID)).toEqual([out.txId, out.txId]);
    expect(new Set(out.eventIds).size).toBe(2);
    expect(journal.events.filter((e) => e === 'db.insert')).toHaveLength(1);
    expect(gateway.sent[1]!.keys).toEqual([out.eventIds[1], 'order-1']);
  });

  it('EndTransaction failure after COMMIT is not an error: the check-back resolves it', async () => {
    const { producer, gateway, store } = setup();
    gateway.failEnd = true;
    await producer.start();
    const out = await producer.transact({ topic: 'orders_tx', body: 'x' }, async () => 'done');
    expect(out.result).toBe('done');
    expect(producer.stats.endTransactionFailures).toBe(1);
    await producer.shutdown();
    expect(store.confirmed).toEqual([]);
  });

  it('tx_record insert error: StoreError with the cause, local rollback, message rolled back', async () => {
    const { producer, store, journal } = setup();
    const cause = new Error("Table 'test.tx_record' doesn't exist");
    store.insertError = cause;
    await producer.start();
    const err = await producer
      .transact({ topic: 'orders_tx', body: 'x' }, async () => 1)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as Error).cause).toBe(cause);
    expect(journal.events).toContain('db.rollback');
    expect(journal.events).toContain('end.rollback:m0');
  });

  it('rejects bad events before anything is sent or written', async () => {
    const { producer, journal } = setup();
    await producer.start();
    const before = journal.events.length;
    await expect(producer.transact({ topic: 'other', body: 'x' }, async () => 1)).rejects.toThrow(
      /event\.topic: got "other"/,
    );
    await expect(producer.transact({ topic: '', body: 'x' }, async () => 1)).rejects.toBeInstanceOf(
      InvalidMessageError,
    );
    await expect(producer.transact([], async () => 1)).rejects.toThrow(/events/);
    expect(journal.events.length).toBe(before);
  });

  it('a work that is not a function is an InvalidOptionError naming it; nothing is sent or written', async () => {
    const { producer, journal } = setup();
    await producer.start();
    const before = journal.events.length;
    const err = await producer
      .transact({ topic: 'orders_tx', body: 'x' }, 'not a function' as unknown as () => Promise<number>)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidOptionError);
    expect(err).toMatchObject({ code: 'INVALID_OPTION', retriable: false, option: 'work' });
    expect((err as Error).message).toBe(
      'Invalid option work: got "not a function"; expected a function (manager, { txId, eventIds }) => Promise',
    );
    expect(journal.events.length).toBe(before);
  });

  it('transact before start and after shutdown: ProducerNotRunningError', async () => {
    const { producer } = setup();
    await expect(producer.transact({ topic: 'orders_tx', body: 'x' }, async () => 1)).rejects.toBeInstanceOf(
      ProducerNotRunningError,
    );
    await producer.start();
    await producer.shutdown();
    await expect(producer.transact({ topic: 'orders_tx', body: 'x' }, async () => 1)).rejects.toBeInstanceOf(
      ProducerNotRunningError,
    );
    await expect(producer.start()).rejects.toBeInstanceOf(ProducerNotRunningError);
  });

  it('shutdown waits for an in-flight transaction to finish', async () => {
    const { producer, journal } = setup();
    await producer.start();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const running = producer.transact({ topic: 'orders_tx', body: 'x' }, async () => {
      journal.add('work');
      await gate;
      return 'late';
    });
    while (!journal.events.includes('work')) await Promise.resolve();
    const stopped = producer.shutdown();
    let stoppedYet = false;
    void stopped.then(() => (stoppedYet = true));
    await Promise.resolve();
    expect(stoppedYet).toBe(false);
    release();
    await expect(running).resolves.toMatchObject({ result: 'late' });
    await stopped;
    expect(journal.events.indexOf('end.commit:m0')).toBeLessThan(journal.events.indexOf('gateway.shutdown'));
  });
});
