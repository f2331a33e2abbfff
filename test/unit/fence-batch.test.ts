/**
 * The fence's batching queue (src/checkback/fence.ts, FenceQueue/decideBatch) over faked
 * primitives that model what the database does: rows that never change, producer transactions
 * still open (a row locked: the batched INSERT that meets one writes nothing; a single one waits
 * until the producer ends or the bound expires), and injected database errors. The real-database
 * side is test/contract/fence.test.ts ("batched for a storm").
 */
import { CheckBackDispatcher } from '../../src/checkback/CheckBackDispatcher';
import { TxRecordResolver, type FenceBatching } from '../../src/checkback/fence';
import type { CheckBackMessage } from '../../src/checkback/resolution';
import type {
  NewTxRecord,
  TombstoneOutcome,
  TombstonesOutcome,
  TxRecordState,
  TxRecordStore,
  TxStatus,
} from '../../src/store/ports';
import { noopLogger } from '../../src/util/logger';

const GROUP = 'orders';
const uuid = (n: number) => `00000000-0000-7000-8000-${String(n).padStart(12, '0')}`;
const message = (txId: string): CheckBackMessage => ({
  messageId: `m-${txId}`,
  topic: 't',
  keys: [],
  properties: {},
  body: Buffer.alloc(0),
  txId,
  origin: GROUP,
});

interface Open {
  /** What the producer transaction will do when it ends. */
  end: (commit: boolean) => void;
  waiters: Array<() => void>;
}

class LockingStore implements TxRecordStore {
  readonly rows = new Map<string, TxRecordState>();
  readonly open = new Map<string, Open>();
  readonly calls: string[] = [];
  /** Fails the next calls of these primitives. */
  failNext: Partial<Record<'readStatuses' | 'insertTombstones' | 'readStatus', number>> = {};

  holdOpen(txId: string): Open {
    const o: Open = {
      waiters: [],
      end: (commit) => {
        this.open.delete(txId);
        if (commit) this.rows.set(txId, { status: 'COMMITTED', resolvedBy: 'PRODUCER' });
        for (const w of o.waiters) w();
      },
    };
    this.open.set(txId, o);
    return o;
  }

  private fail(name: keyof LockingStore['failNext']): void {
    const n = this.failNext[name] ?? 0;
    if (n > 0) {
      this.failNext[name] = n - 1;
      throw new Error(`${name} failed`);
    }
  }

  async insertCommitted(): Promise<boolean> {
    throw new Error('not used');
  }
  async markConfirmed(): Promise<void> {}

  async readStatus(txId: string): Promise<TxStatus | undefined> {
    this.calls.push(`readStatus ${txId}`);
    this.fail('readStatus');
    return this.rows.get(txId)?.status;
  }

  async insertTombstone(record: NewTxRecord, lockWaitTimeoutMs: number): Promise<TombstoneOutcome> {
    this.calls.push(`insertTombstone ${record.txId}`);
    const open = this.open.get(record.txId);
    if (open) {
      // Waits until the producer ends, or the bound expires (a test ends it or lets it expire).
      const ended = await new Promise<boolean>((resolve) => {
        open.waiters.push(() => resolve(true));
        if (lockWaitTimeoutMs < 100) resolve(false);
      });
      if (!ended) return { kind: 'UNDECIDED', reason: 'LOCK_WAIT_TIMEOUT', error: new Error('lock wait') };
    }
    if (this.rows.has(record.txId)) return { kind: 'EXISTS' };
    this.rows.set(record.txId, { status: 'ROLLED_BACK', resolvedBy: 'CHECK_BACK' });
    return { kind: 'INSERTED' };
  }

  async readStatuses(txIds: readonly string[]): Promise<Map<string, TxRecordState>> {
    this.calls.push(`readStatuses ${txIds.length}`);
    this.fail('readStatuses');
    return new Map(txIds.flatMap((id) => (this.rows.has(id) ? [[id, this.rows.get(id)!] as const] : [])));
  }

  async insertTombstones(
    records: readonly NewTxRecord[],
    lockWaitTimeoutMs: number,
  ): Promise<TombstonesOutcome> {
    this.calls.push(`insertTombstones ${records.length} wait ${lockWaitTimeoutMs}`);
    this.fail('insertTombstones');
    // All or nothing, no wait: a locked row fails the whole statement.
    if (records.some((r) => this.open.has(r.txId)))
      return { kind: 'UNDECIDED', reason: 'LOCK_WAIT_TIMEOUT', error: new Error('NOWAIT') };
    for (const r of records)
      if (!this.rows.has(r.txId)) this.rows.set(r.txId, { status: 'ROLLED_BACK', resolvedBy: 'CHECK_BACK' });
    return { kind: 'DONE' };
  }
}

const resolver = (
  store: TxRecordStore,
  lockWaitTimeoutMs = 2000,
  batching: FenceBatching = { concurrency: 2, maxQueued: 1000 },
) => new TxRecordResolver(store, { producerGroup: GROUP, lockWaitTimeoutMs, logger: noopLogger, batching });

describe('the fence, batched (FenceQueue, decideBatch)', () => {
  it('checks that arrive together share one read, one tombstone INSERT and one fresh read', async () => {
    const store = new LockingStore();
    for (let i = 0; i < 30; i++) store.rows.set(uuid(i), { status: 'COMMITTED', resolvedBy: 'PRODUCER' });
    store.rows.set(uuid(30), { status: 'ROLLED_BACK', resolvedBy: 'PRODUCER' });
    const ids = Array.from({ length: 60 }, (_, i) => uuid(i));
    const r = resolver(store);
    const answers = await Promise.all(ids.map((id) => r.resolveDecision(message(id))));
    expect(answers.slice(0, 30).every((a) => a.resolution === 'COMMIT' && a.decidedBy === 'row_found')).toBe(
      true,
    );
    expect(answers[30]).toEqual({ resolution: 'ROLLBACK', decidedBy: 'row_found' });
    expect(answers.slice(31).every((a) => a.resolution === 'ROLLBACK' && a.decidedBy === 'fenced')).toBe(
      true,
    );
    expect(store.calls).toEqual(['readStatuses 60', 'insertTombstones 29 wait 0', 'readStatuses 29']);
    expect(r.bounded).toBe(true);
  });

  it('batches hold at most maxBatch checks and run at most `concurrency` at once', async () => {
    const store = new LockingStore();
    let running = 0;
    let most = 0;
    const read = store.readStatuses.bind(store);
    store.readStatuses = async (ids) => {
      running++;
      most = Math.max(most, running);
      await new Promise((res) => setImmediate(res));
      running--;
      return read(ids);
    };
    const r = new TxRecordResolver(store, {
      producerGroup: GROUP,
      lockWaitTimeoutMs: 2000,
      batching: { concurrency: 2, maxQueued: 1000, maxBatch: 10 },
    });
    const answers = await Promise.all(
      Array.from({ length: 45 }, (_, i) => r.resolveDecision(message(uuid(i)))),
    );
    expect(answers.every((a) => a.resolution === 'ROLLBACK')).toBe(true);
    expect(most).toBe(2);
    const sizes = store.calls
      .filter((c) => c.startsWith('insertTombstones'))
      .map((c) => Number(c.split(' ')[1]));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(10);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(45);
  });

  it("an open producer transaction holds back only its own check; it waits alone and answers by the producer's outcome", async () => {
    for (const commit of [true, false]) {
      const store = new LockingStore();
      const open = store.holdOpen(uuid(5));
      const r = resolver(store);
      const held = r.resolveDecision(message(uuid(5)));
      const others = await Promise.all(
        Array.from({ length: 12 }, (_, i) => uuid(i === 5 ? 100 : i)).map((id) =>
          r.resolveDecision(message(id)),
        ),
      );
      expect(others.every((a) => a.resolution === 'ROLLBACK' && a.decidedBy === 'fenced')).toBe(true);
      // Only the open txId took the single path.
      expect(store.calls.filter((c) => c.startsWith('insertTombstone '))).toEqual([
        `insertTombstone ${uuid(5)}`,
      ]);
      expect(store.rows.has(uuid(5))).toBe(false);
      open.end(commit);
      await expect(held).resolves.toEqual(
        commit
          ? { resolution: 'COMMIT', decidedBy: 'row_found' }
          : { resolution: 'ROLLBACK', decidedBy: 'fenced' },
      );
    }
  });

  it('open transactions waiting alone never take the last slot: batches go on while they wait', async () => {
    const store = new LockingStore();
    const opens = [store.holdOpen(uuid(1)), store.holdOpen(uuid(2)), store.holdOpen(uuid(3))];
    const r = resolver(store, 2000, { concurrency: 2, maxQueued: 1000 });
    const held = [1, 2, 3].map((i) => r.resolveDecision(message(uuid(i))));
    const first = await Promise.all(
      Array.from({ length: 10 }, (_, i) => r.resolveDecision(message(uuid(10 + i)))),
    );
    // Checks arriving later still get a batch slot while all three producer transactions stay open.
    const later = await Promise.all(
      Array.from({ length: 10 }, (_, i) => r.resolveDecision(message(uuid(30 + i)))),
    );
    expect([...first, ...later].every((a) => a.resolution === 'ROLLBACK' && a.decidedBy === 'fenced')).toBe(
      true,
    );
    for (const o of opens) o.end(true);
    expect((await Promise.all(held)).map((a) => a.resolution)).toEqual(['COMMIT', 'COMMIT', 'COMMIT']);
  });

  it('an open producer transaction past the lock bound: UNKNOWN (lock_timeout), no tombstone, never ROLLBACK', async () => {
    const store = new LockingStore();
    store.holdOpen(uuid(3));
    const r = resolver(store, 50);
    const answers = await Promise.all([1, 2, 3, 4].map((i) => r.resolveDecision(message(uuid(i)))));
    expect(answers[2]).toEqual({ resolution: 'UNKNOWN', decidedBy: 'lock_timeout' });
    expect(store.rows.has(uuid(3))).toBe(false);
    expect([answers[0], answers[1], answers[3]].every((a) => a.resolution === 'ROLLBACK')).toBe(true);
  });

  it('database errors answer UNKNOWN, never ROLLBACK: the first read, the fresh read', async () => {
    const ids = [uuid(1), uuid(2), uuid(3)];
    const store = new LockingStore();
    store.failNext = { readStatuses: 1 };
    const first = resolver(store);
    let answers = await Promise.all(ids.map((id) => first.resolveDecision(message(id))));
    expect(answers.every((a) => a.resolution === 'UNKNOWN' && a.decidedBy === 'error')).toBe(true);
    expect(store.rows.size).toBe(0);
    // The tombstones committed, the fresh read failed: UNKNOWN; the next check reads ROLLBACK.
    const r = resolver(store);
    const read = store.readStatuses.bind(store);
    let n = 0;
    store.readStatuses = async (txIds) => {
      if (++n === 2) throw new Error('fresh read failed');
      return read(txIds);
    };
    answers = await Promise.all(ids.map((id) => r.resolveDecision(message(id))));
    expect(answers.every((a) => a.resolution === 'UNKNOWN' && a.decidedBy === 'error')).toBe(true);
    answers = await Promise.all(ids.map((id) => r.resolveDecision(message(id))));
    expect(answers.every((a) => a.resolution === 'ROLLBACK' && a.decidedBy === 'row_found')).toBe(true);
  });

  it('a failing batched INSERT is cut down to single decisions, each the proven single path', async () => {
    const store = new LockingStore();
    store.failNext = { insertTombstones: 100 };
    const ids = [uuid(1), uuid(2), uuid(3), uuid(4)];
    const r = resolver(store);
    const answers = await Promise.all(ids.map((id) => r.resolveDecision(message(id))));
    expect(answers.every((a) => a.resolution === 'ROLLBACK' && a.decidedBy === 'fenced')).toBe(true);
    expect(store.calls.filter((c) => c.startsWith('insertTombstone ')).sort()).toEqual(
      ids.map((id) => `insertTombstone ${id}`),
    );
  });

  it('a fresh read that misses a row it was told exists answers UNKNOWN', async () => {
    const store = new LockingStore();
    store.insertTombstones = async () => ({ kind: 'DONE' }); // lies: writes nothing
    const r = resolver(store);
    const answers = await Promise.all([uuid(1), uuid(2)].map((id) => r.resolveDecision(message(id))));
    expect(answers.every((a) => a.resolution === 'UNKNOWN' && a.decidedBy === 'error')).toBe(true);
  });

  it('sheds past the queue bound without touching the database, and the dispatcher counts it', async () => {
    const store = new LockingStore();
    const builtIn = resolver(store, 2000, { concurrency: 1, maxQueued: 3 });
    const dispatcher = new CheckBackDispatcher({
      producerGroup: GROUP,
      builtIn,
      resolverScope: 'without-tx-id',
      // The dispatcher's own bound would shed at 1 + 0: a bounded built-in is not behind it.
      concurrency: 1,
      maxQueued: 0,
      logger: noopLogger,
    });
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => dispatcher.handle(message(uuid(i)))),
    );
    // 1 free batch slot + 3 queued accepted, 6 shed.
    expect(answers.filter((a) => a === 'ROLLBACK')).toHaveLength(4);
    expect(answers.filter((a) => a === 'UNKNOWN')).toHaveLength(6);
    expect(dispatcher.stats).toMatchObject({ received: 10, rollback: 4, unknown: 6, shed: 6 });
    expect(store.rows.size).toBe(4);
  });

  it('rejects bad batching limits with a typed error naming the option and the value', () => {
    for (const [batching, option] of [
      [{ concurrency: 0, maxQueued: 10 }, 'batching.concurrency'],
      [{ concurrency: 2, maxQueued: -1 }, 'batching.maxQueued'],
      [{ concurrency: 2, maxQueued: 10, maxBatch: 1.5 }, 'batching.maxBatch'],
    ] as const) {
      expect(() => resolver(new LockingStore(), 2000, batching)).toThrow(
        expect.objectContaining({ code: 'INVALID_OPTION', message: expect.stringContaining(option) }),
      );
    }
  });

  it('a store without the batched primitives keeps the single path behind the dispatcher', async () => {
    const store = new LockingStore();
    const single: TxRecordStore = {
      insertCommitted: () => store.insertCommitted(),
      markConfirmed: () => store.markConfirmed(),
      readStatus: (id) => store.readStatus(id),
      insertTombstone: (r, ms) => store.insertTombstone(r, ms),
    };
    const r = resolver(single);
    expect(r.bounded).toBe(false);
    await expect(r.resolveDecision(message(uuid(1)))).resolves.toEqual({
      resolution: 'ROLLBACK',
      decidedBy: 'fenced',
    });
    expect(store.calls).toEqual([`readStatus ${uuid(1)}`, `insertTombstone ${uuid(1)}`]);
  });

  it('random storms with open transactions and faults: a ROLLBACK always has a ROLLED_BACK row, a COMMIT a COMMITTED one', async () => {
    let seed = 42;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 40; round++) {
      const store = new LockingStore();
      const ids = Array.from({ length: 30 }, (_, i) => uuid(round * 100 + i));
      const opens: Open[] = [];
      for (const id of ids) {
        const x = rand();
        if (x < 0.3) store.rows.set(id, { status: 'COMMITTED', resolvedBy: 'PRODUCER' });
        else if (x < 0.4) opens.push(store.holdOpen(id));
      }
      store.failNext = {
        readStatuses: rand() < 0.3 ? 1 : 0,
        insertTombstones: Math.floor(rand() * 3),
        readStatus: rand() < 0.2 ? 1 : 0,
      };
      const r = resolver(store, 2000, { concurrency: 1 + Math.floor(rand() * 3), maxQueued: 1000 });
      const answering = Promise.all(ids.map((id) => r.resolveDecision(message(id))));
      // The open producer transactions end, committing or not, once their checks are waiting.
      await new Promise((res) => setTimeout(res, 5));
      for (const o of opens) o.end(rand() < 0.5);
      const answers = await answering;
      answers.forEach((a, i) => {
        const row = store.rows.get(ids[i]!);
        if (a.resolution === 'ROLLBACK') expect(row?.status).toBe('ROLLED_BACK');
        if (a.resolution === 'COMMIT') expect(row?.status).toBe('COMMITTED');
      });
    }
  });
});
