import { TransactionResolution, TxRecordResolver, type CheckBackMessage, type FenceOutcome } from '../../src';
import { CheckBackDispatcher } from '../../src/checkback/CheckBackDispatcher';
import { noopLogger } from '../../src/util/logger';
import type { TxRecordStore } from '../../src/store/ports';

function storeAnswering(outcome: FenceOutcome | (() => Promise<FenceOutcome>)) {
  const calls: string[] = [];
  const store: TxRecordStore = {
    insertCommitted: async () => true,
    markConfirmed: async () => undefined,
    fence: async (r) => {
      calls.push(r.txId);
      return typeof outcome === 'function' ? outcome() : outcome;
    },
  };
  return { store, calls };
}

const msg = (over: Partial<CheckBackMessage> = {}): CheckBackMessage => ({
  messageId: 'm1',
  topic: 'orders_tx',
  keys: [],
  properties: {},
  body: Buffer.from('x'),
  txId: '0192f1a4-0000-7000-8000-000000000001',
  origin: 'orders',
  ...over,
});

describe('TxRecordResolver decision table', () => {
  it.each<[FenceOutcome, TransactionResolution]>([
    [{ kind: 'FENCED' }, 'ROLLBACK'],
    [{ kind: 'COMMITTED' }, 'COMMIT'],
    [{ kind: 'ROLLED_BACK' }, 'ROLLBACK'],
    [{ kind: 'UNDECIDED', reason: 'LOCK_WAIT_TIMEOUT', error: new Error('1205') }, 'UNKNOWN'],
    [{ kind: 'UNDECIDED', reason: 'DEADLOCK', error: new Error('1213') }, 'UNKNOWN'],
    [{ kind: 'UNDECIDED', reason: 'DATABASE_ERROR', error: new Error('ECONNREFUSED') }, 'UNKNOWN'],
  ])('fence outcome %p answers %s', async (outcome, expected) => {
    const { store } = storeAnswering(outcome);
    const r = new TxRecordResolver(store, { producerGroup: 'orders', lockWaitTimeoutMs: 1000 });
    await expect(r.resolve(msg())).resolves.toBe(expected);
  });

  it('never writes a tombstone for another producerGroup (wrong-service guard)', async () => {
    const { store, calls } = storeAnswering({ kind: 'FENCED' });
    const r = new TxRecordResolver(store, { producerGroup: 'orders', lockWaitTimeoutMs: 1000 });
    await expect(r.resolve(msg({ origin: 'payments' }))).resolves.toBe('UNKNOWN');
    await expect(r.resolve(msg({ origin: undefined }))).resolves.toBe('UNKNOWN');
    await expect(r.resolve(msg({ txId: undefined }))).resolves.toBe('UNKNOWN');
    expect(calls).toEqual([]);
  });

  it('answers UNKNOWN to a forged or malformed TX_ID and writes nothing', async () => {
    const { store, calls } = storeAnswering({ kind: 'FENCED' });
    const r = new TxRecordResolver(store, { producerGroup: 'orders', lockWaitTimeoutMs: 1000 });
    for (const txId of ['', 'x', "1' OR '1'='1", 'A'.repeat(400), '0192F1A4-0000-7000-8000-000000000001']) {
      await expect(r.resolve(msg({ txId }))).resolves.toBe('UNKNOWN');
    }
    expect(calls).toEqual([]);
  });

  it('coalesces concurrent check-backs for one txId into one fence write', async () => {
    let release!: (o: FenceOutcome) => void;
    const pending = new Promise<FenceOutcome>((r) => (release = r));
    const { store, calls } = storeAnswering(() => pending);
    const r = new TxRecordResolver(store, { producerGroup: 'orders', lockWaitTimeoutMs: 1000 });
    const answers = Promise.all([r.resolve(msg()), r.resolve(msg({ messageId: 'm2' })), r.resolve(msg())]);
    release({ kind: 'COMMITTED' });
    expect(await answers).toEqual(['COMMIT', 'COMMIT', 'COMMIT']);
    expect(calls).toHaveLength(1);
    await r.resolve(msg());
    expect(calls).toHaveLength(2);
  });
});

describe('CheckBackDispatcher', () => {
  const builtIn = { resolve: jest.fn(async () => TransactionResolution.COMMIT) };
  const user = { resolve: jest.fn(async () => TransactionResolution.ROLLBACK) };
  beforeEach(() => {
    builtIn.resolve.mockClear();
    user.resolve.mockClear();
  });
  const make = (over: Partial<ConstructorParameters<typeof CheckBackDispatcher>[0]> = {}) =>
    new CheckBackDispatcher({
      producerGroup: 'orders',
      builtIn,
      resolverScope: 'without-tx-id',
      concurrency: 2,
      maxQueued: 2,
      logger: noopLogger,
      ...over,
    });

  it('sends our transactions to the built-in resolver and the rest to the user resolver', async () => {
    const d = make({ resolver: user });
    await expect(d.handle(msg())).resolves.toBe('COMMIT');
    await expect(d.handle(msg({ txId: undefined, origin: undefined }))).resolves.toBe('ROLLBACK');
    expect(builtIn.resolve).toHaveBeenCalledTimes(1);
    expect(user.resolve).toHaveBeenCalledTimes(1);
  });

  it('resolverScope "all" replaces the built-in resolver', async () => {
    const d = make({ resolver: user, resolverScope: 'all' });
    await expect(d.handle(msg())).resolves.toBe('ROLLBACK');
    expect(builtIn.resolve).not.toHaveBeenCalled();
  });

  it('answers UNKNOWN for messages without TX_ID when there is no user resolver', async () => {
    const d = make();
    await expect(d.handle(msg({ txId: undefined }))).resolves.toBe('UNKNOWN');
  });

  it('answers UNKNOWN and counts a foreign origin', async () => {
    const d = make();
    await expect(d.handle(msg({ origin: 'payments' }))).resolves.toBe('UNKNOWN');
    expect(d.stats.foreignOrigin).toBe(1);
    expect(builtIn.resolve).not.toHaveBeenCalled();
  });

  it('a resolver that throws or returns garbage is UNKNOWN, never ROLLBACK', async () => {
    const thrower = {
      resolve: async (): Promise<TransactionResolution> => Promise.reject(new Error('db down')),
    };
    const liar = { resolve: async () => 'commit' as unknown as TransactionResolution };
    await expect(make({ resolver: thrower, resolverScope: 'all' }).handle(msg())).resolves.toBe('UNKNOWN');
    const d = make({ resolver: liar, resolverScope: 'all' });
    await expect(d.handle(msg())).resolves.toBe('UNKNOWN');
    expect(d.stats.errors).toBe(1);
  });

  it('limits concurrency and sheds past the queue bound with UNKNOWN', async () => {
    let inside = 0;
    let maxInside = 0;
    const gates: Array<() => void> = [];
    const slow = {
      resolve: async () => {
        inside++;
        maxInside = Math.max(maxInside, inside);
        await new Promise<void>((r) => gates.push(r));
        inside--;
        return TransactionResolution.COMMIT;
      },
    };
    const d = make({ builtIn: slow, concurrency: 2, maxQueued: 2 });
    const answers = Array.from({ length: 6 }, (_, i) => d.handle(msg({ messageId: `m${i}` })));
    await expect(answers[4]).resolves.toBe('UNKNOWN');
    await expect(answers[5]).resolves.toBe('UNKNOWN');
    while (gates.length > 0 || inside > 0) {
      gates.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    expect(await Promise.all(answers.slice(0, 4))).toEqual(['COMMIT', 'COMMIT', 'COMMIT', 'COMMIT']);
    expect(maxInside).toBe(2);
    expect(d.stats).toMatchObject({ received: 6, shed: 2, commit: 4, unknown: 2 });
  });
});
