import {
  TransactionResolution,
  TxRecordResolver,
  type CheckBackMessage,
  type TombstoneOutcome,
} from '../../src';
import { CheckBackDispatcher } from '../../src/checkback/CheckBackDispatcher';
import { answerReadOnly, ownership, type DecidedResolution } from '../../src/checkback/fence';
import { noopLogger, type Logger } from '../../src/util/logger';
import type { TxStatus } from '../../src/store/ports';

type Read = TxStatus | undefined | Error;

/** The fence's primitives, scripted: each read and each tombstone attempt answers the next item. */
function primitives(reads: Read[], tombstone?: TombstoneOutcome | (() => Promise<TombstoneOutcome>)) {
  const calls: string[] = [];
  const store = {
    readStatus: async (txId: string) => {
      calls.push(`read ${txId}`);
      const next = reads.shift();
      if (next instanceof Error) throw next;
      return next;
    },
    insertTombstone: async (r: { txId: string }, ms: number): Promise<TombstoneOutcome> => {
      calls.push(`tombstone ${r.txId} ${ms}`);
      if (tombstone === undefined) throw new Error('no tombstone scripted');
      return typeof tombstone === 'function' ? tombstone() : tombstone;
    },
  };
  return { store, calls };
}

const TX = '0192f1a4-0000-7000-8000-000000000001';
const EVENT = '0192f1a4-0000-7000-8000-0000000000e1';

const msg = (over: Partial<CheckBackMessage> = {}): CheckBackMessage => ({
  messageId: 'm1',
  topic: 'orders_tx',
  keys: [],
  properties: {},
  body: Buffer.from('x'),
  txId: TX,
  origin: 'orders',
  ...over,
});

const resolver = (store: ReturnType<typeof primitives>['store'], over = {}) =>
  new TxRecordResolver(store, { producerGroup: 'orders', lockWaitTimeoutMs: 1000, ...over });

const undecided = (reason: 'LOCK_WAIT_TIMEOUT' | 'DEADLOCK' | 'DATABASE_ERROR'): TombstoneOutcome => ({
  kind: 'UNDECIDED',
  reason,
  error: new Error(reason),
});

describe('the fence (src/checkback/fence.ts) decision table', () => {
  it.each<[string, Read[], TombstoneOutcome | undefined, DecidedResolution, string[]]>([
    [
      'row COMMITTED on the first read',
      ['COMMITTED'],
      undefined,
      { resolution: 'COMMIT', decidedBy: 'row_found' },
      ['read'],
    ],
    [
      'row ROLLED_BACK on the first read',
      ['ROLLED_BACK'],
      undefined,
      { resolution: 'ROLLBACK', decidedBy: 'row_found' },
      ['read'],
    ],
    [
      'first read fails',
      [new Error('ECONNRESET')],
      undefined,
      { resolution: 'UNKNOWN', decidedBy: 'error' },
      ['read'],
    ],
    [
      'tombstone inserted',
      [undefined],
      { kind: 'INSERTED' },
      { resolution: 'ROLLBACK', decidedBy: 'fenced' },
      ['read', 'tombstone'],
    ],
    [
      'exists, fresh read COMMITTED',
      [undefined, 'COMMITTED'],
      { kind: 'EXISTS' },
      { resolution: 'COMMIT', decidedBy: 'row_found' },
      ['read', 'tombstone', 'read'],
    ],
    [
      'exists, fresh read ROLLED_BACK',
      [undefined, 'ROLLED_BACK'],
      { kind: 'EXISTS' },
      { resolution: 'ROLLBACK', decidedBy: 'row_found' },
      ['read', 'tombstone', 'read'],
    ],
    [
      'exists, fresh read finds nothing',
      [undefined, undefined],
      { kind: 'EXISTS' },
      { resolution: 'UNKNOWN', decidedBy: 'error' },
      ['read', 'tombstone', 'read'],
    ],
    [
      'exists, fresh read fails',
      [undefined, new Error('ECONNRESET')],
      { kind: 'EXISTS' },
      { resolution: 'UNKNOWN', decidedBy: 'error' },
      ['read', 'tombstone', 'read'],
    ],
    [
      'lock-wait timeout',
      [undefined],
      undecided('LOCK_WAIT_TIMEOUT'),
      { resolution: 'UNKNOWN', decidedBy: 'lock_timeout' },
      ['read', 'tombstone'],
    ],
    [
      'deadlock victim',
      [undefined],
      undecided('DEADLOCK'),
      { resolution: 'UNKNOWN', decidedBy: 'deadlock' },
      ['read', 'tombstone'],
    ],
    [
      'database error',
      [undefined],
      undecided('DATABASE_ERROR'),
      { resolution: 'UNKNOWN', decidedBy: 'error' },
      ['read', 'tombstone'],
    ],
    [
      'tombstone primitive throws',
      [undefined],
      undefined,
      { resolution: 'UNKNOWN', decidedBy: 'error' },
      ['read', 'tombstone'],
    ],
  ])('%s', async (_name, reads, tombstone, expected, steps) => {
    const { store, calls } = primitives(reads, tombstone);
    await expect(resolver(store).resolveDecision(msg())).resolves.toEqual(expected);
    expect(calls.map((c) => c.split(' ')[0])).toEqual(steps);
  });

  it('passes the lock-wait bound and our record to the tombstone primitive', async () => {
    const { store, calls } = primitives([undefined], { kind: 'INSERTED' });
    await resolver(store, { lockWaitTimeoutMs: 1500 }).resolve(msg());
    expect(calls).toEqual([`read ${TX}`, `tombstone ${TX} 1500`]);
  });

  it('never writes a tombstone for another producerGroup (wrong-service guard), warns once per origin', async () => {
    const { store, calls } = primitives([], { kind: 'INSERTED' });
    const warn = jest.fn();
    const logger = { ...noopLogger, warn } as unknown as Logger;
    const r = resolver(store, { logger });
    await expect(r.resolveDecision(msg({ origin: 'payments' }))).resolves.toEqual({
      resolution: 'UNKNOWN',
      decidedBy: 'foreign_origin',
    });
    await expect(r.resolve(msg({ origin: 'payments' }))).resolves.toBe('UNKNOWN');
    await expect(r.resolve(msg({ origin: undefined }))).resolves.toBe('UNKNOWN');
    await expect(r.resolveDecision(msg({ txId: undefined }))).resolves.toMatchObject({
      decidedBy: 'no_tx_id',
    });
    expect(calls).toEqual([]);
    expect(warn).toHaveBeenCalledTimes(2);
  });

  it('answers UNKNOWN to a forged or malformed TX_ID or EVENT_ID and touches nothing', async () => {
    const { store, calls } = primitives([], { kind: 'INSERTED' });
    const r = resolver(store);
    for (const txId of ['', 'x', "1' OR '1'='1", 'A'.repeat(400), '0192F1A4-0000-7000-8000-000000000001']) {
      await expect(r.resolveDecision(msg({ txId }))).resolves.toMatchObject({ decidedBy: 'malformed' });
    }
    await expect(r.resolve(msg({ properties: { EVENT_ID: 'bad-event-id' } }))).resolves.toBe('UNKNOWN');
    expect(calls).toEqual([]);
  });

  it('coalesces concurrent check-backs for one txId into one fence write', async () => {
    let release!: (o: TombstoneOutcome) => void;
    const pending = new Promise<TombstoneOutcome>((r) => (release = r));
    const { store, calls } = primitives([undefined, 'COMMITTED', undefined], () => pending);
    const r = resolver(store);
    const answers = Promise.all([r.resolve(msg()), r.resolve(msg({ messageId: 'm2' })), r.resolve(msg())]);
    await new Promise((resolve) => setImmediate(resolve));
    release({ kind: 'EXISTS' });
    expect(await answers).toEqual(['COMMIT', 'COMMIT', 'COMMIT']);
    expect(calls.filter((c) => c.startsWith('tombstone'))).toHaveLength(1);
    await r.resolve(msg());
    expect(calls.filter((c) => c.startsWith('tombstone'))).toHaveLength(2);
  });

  it('confirms the event of our half message answered COMMIT, and nothing else', () => {
    const confirmed: string[] = [];
    const r = resolver(primitives([]).store, { onCommitAnswered: (id: string) => confirmed.push(id) });
    const ours = msg({ properties: { EVENT_ID: EVENT } });
    r.answered(ours, TransactionResolution.COMMIT);
    r.answered(ours, TransactionResolution.ROLLBACK);
    r.answered(ours, TransactionResolution.UNKNOWN);
    r.answered(msg(), TransactionResolution.COMMIT); // no EVENT_ID
    r.answered({ ...ours, origin: 'payments' }, TransactionResolution.COMMIT);
    r.answered(msg({ properties: { EVENT_ID: 'bad' } }), TransactionResolution.COMMIT);
    expect(confirmed).toEqual([EVENT]);
  });

  it('ownership: the one guard, with and without a producerGroup', () => {
    expect(ownership(msg({ properties: { EVENT_ID: EVENT } }), 'orders')).toEqual({
      owned: true,
      txId: TX,
      eventId: EVENT,
    });
    expect(ownership(msg({ origin: 'payments' }), 'orders')).toEqual({
      owned: false,
      decidedBy: 'foreign_origin',
    });
    expect(ownership(msg({ origin: 'payments' }), undefined)).toEqual({ owned: true, txId: TX });
    expect(ownership(msg({ txId: 'x', origin: 'payments' }), undefined)).toEqual({
      owned: false,
      decidedBy: 'malformed',
    });
  });
});

describe('the fence in read-only mode (the relay)', () => {
  it.each<[Read[], DecidedResolution]>([
    [['COMMITTED'], { resolution: 'COMMIT', decidedBy: 'row_found' }],
    [['ROLLED_BACK'], { resolution: 'ROLLBACK', decidedBy: 'row_found' }],
    [[undefined], { resolution: 'UNKNOWN', decidedBy: 'no_row' }],
    [[new Error('ECONNRESET')], { resolution: 'UNKNOWN', decidedBy: 'error' }],
  ])('reads %p, answers %p, never writes', async (reads, expected) => {
    const readFails = reads[0] instanceof Error;
    const { store, calls } = primitives(reads, { kind: 'INSERTED' });
    const warn = jest.fn();
    const logger = { ...noopLogger, warn } as unknown as Logger;
    await expect(answerReadOnly(store, msg({ origin: 'any-group' }), logger)).resolves.toEqual(expected);
    expect(calls).toEqual([`read ${TX}`]);
    expect(warn).toHaveBeenCalledTimes(readFails ? 1 : 0);
  });

  it('answers UNKNOWN without a read to a missing or malformed TX_ID', async () => {
    const { store, calls } = primitives([]);
    await expect(answerReadOnly(store, msg({ txId: undefined }), noopLogger)).resolves.toMatchObject({
      resolution: 'UNKNOWN',
    });
    await expect(answerReadOnly(store, msg({ txId: 'nope' }), noopLogger)).resolves.toMatchObject({
      resolution: 'UNKNOWN',
    });
    expect(calls).toEqual([]);
  });
});

describe('CheckBackDispatcher', () => {
  /** The real fence over primitives that find every transaction COMMITTED. */
  const reads = jest.fn(async (): Promise<TxStatus | undefined> => 'COMMITTED');
  const builtIn = new TxRecordResolver(
    { readStatus: reads, insertTombstone: async () => ({ kind: 'INSERTED' }) },
    { producerGroup: 'orders', lockWaitTimeoutMs: 1000 },
  );
  const user = { resolve: jest.fn(async () => TransactionResolution.ROLLBACK) };
  beforeEach(() => {
    reads.mockClear();
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
    expect(reads).toHaveBeenCalledTimes(1);
    expect(user.resolve).toHaveBeenCalledTimes(1);
  });

  it('tells the fence every answer: a custom COMMIT for our half message confirms its event', async () => {
    const confirmed: string[] = [];
    const fence = new TxRecordResolver(
      { readStatus: async () => 'COMMITTED' as const, insertTombstone: async () => ({ kind: 'INSERTED' }) },
      { producerGroup: 'orders', lockWaitTimeoutMs: 1000, onCommitAnswered: (id) => confirmed.push(id) },
    );
    const committer = { resolve: async () => TransactionResolution.COMMIT };
    const withEvent = msg({ properties: { EVENT_ID: EVENT } });
    // Deciding is not answering: nothing is confirmed until the answer reached the proxy
    // (answerSent, called by the gateway after EndTransaction returned OK).
    for (const d of [
      make({ builtIn: fence }),
      make({ builtIn: fence, resolver: committer, resolverScope: 'all' }),
      make({ builtIn: fence, resolver: user, resolverScope: 'all' }),
    ]) {
      const before = confirmed.length;
      const answer = await d.handle(withEvent);
      expect(confirmed).toHaveLength(before);
      d.answerSent(withEvent, answer);
      expect(confirmed.length - before).toBe(answer === TransactionResolution.COMMIT ? 1 : 0);
    }
    expect(confirmed).toEqual([EVENT, EVENT]);
  });

  it('resolverScope "all" replaces the built-in resolver', async () => {
    const d = make({ resolver: user, resolverScope: 'all' });
    await expect(d.handle(msg())).resolves.toBe('ROLLBACK');
    expect(reads).not.toHaveBeenCalled();
  });

  it('answers UNKNOWN for messages without TX_ID when there is no user resolver', async () => {
    const d = make();
    await expect(d.handle(msg({ txId: undefined }))).resolves.toBe('UNKNOWN');
  });

  it('answers UNKNOWN and counts a foreign origin', async () => {
    const d = make();
    await expect(d.handle(msg({ origin: 'payments' }))).resolves.toBe('UNKNOWN');
    expect(d.stats.foreignOrigin).toBe(1);
    expect(reads).not.toHaveBeenCalled();
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
    const slow = new TxRecordResolver(
      {
        readStatus: async (): Promise<TxStatus | undefined> => {
          inside++;
          maxInside = Math.max(maxInside, inside);
          await new Promise<void>((r) => gates.push(r));
          inside--;
          return 'COMMITTED';
        },
        insertTombstone: async () => ({ kind: 'INSERTED' }),
      },
      { producerGroup: 'orders', lockWaitTimeoutMs: 1000 },
    );
    const d = make({ builtIn: slow, concurrency: 2, maxQueued: 2 });
    // Distinct txIds: the fence coalesces check-backs of one txId.
    const answers = Array.from({ length: 6 }, (_, i) =>
      d.handle(msg({ messageId: `m${i}`, txId: `0192f1a4-0000-7000-8000-00000000000${i}` })),
    );
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
