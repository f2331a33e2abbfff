import type { DataSource } from 'typeorm';
import { collectStatus, InvalidOptionError, StoreError } from '../../src';
import { resolveStatusOptions, shapeStatus, type StatusRows } from '../../src/observability/status';

/** A DataSource that answers each table's statement from canned rows and records the SQL. */
function fakeDs(
  rows: Partial<StatusRows>,
  opts: { fail?: string; initialized?: boolean; type?: string } = {},
): DataSource & { calls: Array<{ sql: string; params: unknown[] }> } {
  const calls: Array<{ sql: string; params: unknown[] }> = [];
  const ds = {
    options: { type: opts.type ?? 'mariadb' },
    isInitialized: opts.initialized ?? true,
    createQueryRunner: () => ({}),
    calls,
    query: async (sql: string, params: unknown[]) => {
      calls.push({ sql, params });
      const table = /FROM (\w+)/.exec(sql)?.[1] ?? '';
      if (opts.fail === table) throw Object.assign(new Error('connection lost'), { code: 'ECONNRESET' });
      if (table === 'tx_record') return rows.txRecords ?? [];
      if (table === 'outbox_event') return rows.outbox ?? [];
      return rows.consumed ?? [];
    },
  };
  return ds as unknown as DataSource & { calls: typeof calls };
}

const none = { topics: null, consumerGroups: null, discardHorizonMs: 1_200_000 };
const noState = { events: 0, transactions: 0, oldestAgeMs: null };
const noStates = { awaitingBroker: noState, overdue: noState, republishing: noState };

describe('collectStatus: shaping the rows', () => {
  it('counts tx_record rows by status, by resolver and by both; unknown values only count in total', () => {
    const s = shapeStatus(
      {
        txRecords: [
          { status: 'COMMITTED', resolved_by: 'PRODUCER', n: '7' },
          { status: 'ROLLED_BACK', resolved_by: 'CHECK_BACK', n: 2 },
          { status: 'ROLLED_BACK', resolved_by: 'PRODUCER', n: 1 },
          { status: 'WEIRD', resolved_by: 'CHECK_BACK', n: 4 },
        ],
        outbox: [],
        consumed: [],
      },
      none,
      new Date('2026-01-02T03:04:05.678Z'),
    );
    expect(s.generatedAt).toBe('2026-01-02T03:04:05.678Z');
    expect(s.txRecords).toEqual({
      total: 14,
      byStatus: { COMMITTED: 7, ROLLED_BACK: 3 },
      byResolvedBy: { PRODUCER: 8, CHECK_BACK: 6 },
      byStatusAndResolvedBy: {
        COMMITTED: { PRODUCER: 7, CHECK_BACK: 0 },
        ROLLED_BACK: { PRODUCER: 1, CHECK_BACK: 2 },
      },
    });
  });

  it('sums outbox counts over topics, keeps per-topic counts, and takes the oldest undelivered age', () => {
    const s = shapeStatus(
      {
        txRecords: [],
        outbox: [
          { k: 'count', topic: 'a', status: 'SENT', n: 10, age_us: null, txs: null },
          { k: 'count', topic: 'a', status: 'NEW', n: 2, age_us: null, txs: null },
          { k: 'count', topic: 'b', status: 'IN_FLIGHT', n: '3', age_us: null, txs: null },
          { k: 'count', topic: 'b', status: 'DEAD', n: 1, age_us: null, txs: null },
          { k: 'pending', topic: 'a', status: 'NEW', n: 2, age_us: '1500999', txs: null },
          { k: 'pending', topic: 'b', status: 'IN_FLIGHT', n: 3, age_us: 250_000, txs: null },
          { k: 'in_doubt', topic: null, status: null, n: 3, age_us: 260_400, txs: 2 },
          { k: 'in_doubt_state', topic: null, status: 'awaiting_broker', n: 2, age_us: 200_000, txs: 1 },
          { k: 'in_doubt_state', topic: null, status: 'republishing', n: 1, age_us: 260_400, txs: 1 },
        ],
        consumed: [],
      },
      none,
      new Date(),
    );
    expect(s.outbox.total).toBe(16);
    expect(s.outbox.byStatus).toEqual({ NEW: 2, IN_FLIGHT: 3, SENT: 10, DEAD: 1, CDC: 0 });
    expect(s.outbox.undelivered).toBe(5);
    expect(s.outbox.dead).toBe(1);
    expect(s.outbox.oldestUndeliveredAgeMs).toBe(1500);
    expect(s.outbox.byTopic.a).toEqual({
      total: 12,
      byStatus: { NEW: 2, IN_FLIGHT: 0, SENT: 10, DEAD: 0, CDC: 0 },
      undelivered: 2,
      oldestUndeliveredAgeMs: 1500,
    });
    expect(s.outbox.byTopic.b!.oldestUndeliveredAgeMs).toBe(250);
    expect(s.inDoubt).toEqual({
      transactions: 2,
      events: 3,
      oldestAgeMs: 260,
      byState: {
        awaitingBroker: { events: 2, transactions: 1, oldestAgeMs: 200 },
        overdue: noState,
        republishing: { events: 1, transactions: 1, oldestAgeMs: 260 },
      },
    });
  });

  it('reports null ages and zero counts when nothing is pending; a negative age (clock step) becomes 0', () => {
    const empty = shapeStatus(
      {
        txRecords: [],
        outbox: [{ k: 'in_doubt', topic: null, status: null, n: 0, age_us: null, txs: 0 }],
        consumed: [],
      },
      none,
      new Date(),
    );
    expect(empty.inDoubt).toEqual({ transactions: 0, events: 0, oldestAgeMs: null, byState: noStates });
    expect(empty.outbox.oldestUndeliveredAgeMs).toBeNull();
    expect(empty.outbox.byTopic).toEqual({});
    const skewed = shapeStatus(
      {
        txRecords: [],
        outbox: [
          { k: 'count', topic: 'a', status: 'NEW', n: 1, age_us: null, txs: null },
          { k: 'pending', topic: 'a', status: 'NEW', n: 1, age_us: -5000, txs: null },
        ],
        consumed: [],
      },
      none,
      new Date(),
    );
    expect(skewed.outbox.oldestUndeliveredAgeMs).toBe(0);
  });

  it('counts consumed_event rows per consumer group and outcome', () => {
    const s = shapeStatus(
      {
        txRecords: [],
        outbox: [],
        consumed: [
          { consumer_group: 'g1', outcome: 'APPLIED', n: 5 },
          { consumer_group: 'g1', outcome: 'STALE', n: 1 },
          { consumer_group: 'g2', outcome: 'IGNORED', n: '2' },
        ],
      },
      { topics: null, consumerGroups: ['g1', 'g2'], discardHorizonMs: 1_200_000 },
      new Date(),
    );
    expect(s.consumedEvents).toEqual({
      total: 8,
      byConsumerGroup: {
        g1: { total: 6, APPLIED: 5, STALE: 1, IGNORED: 0 },
        g2: { total: 2, APPLIED: 0, STALE: 0, IGNORED: 2 },
      },
    });
    expect(s.filter).toEqual({ topics: null, consumerGroups: ['g1', 'g2'] });
  });

  it('is JSON round-trippable (a plain object)', async () => {
    const s = await collectStatus(
      fakeDs({ txRecords: [{ status: 'COMMITTED', resolved_by: 'PRODUCER', n: 1 }] }),
    );
    expect(JSON.parse(JSON.stringify(s))).toEqual(s);
  });
});

describe('collectStatus: options, queries and errors', () => {
  it('runs one statement per table and binds the topic and group filters as parameters', async () => {
    const ds = fakeDs({});
    const s = await collectStatus(ds, { topics: ['t1', 't2', 't1'], consumerGroups: ['g'] });
    expect(ds.calls).toHaveLength(3);
    const tx = ds.calls.find((c) => c.sql.includes('FROM tx_record'))!;
    expect(tx.sql).toContain('topic IN (?, ?)');
    expect(tx.params).toEqual(['t1', 't2']);
    const outbox = ds.calls.find((c) => c.sql.startsWith("SELECT 'count'"))!;
    // counts, undelivered, in doubt, then the in-doubt states: horizon (20 min in µs) and topics.
    expect(outbox.params).toEqual(['t1', 't2', 't1', 't2', 't1', 't2', 1_200_000_000, 't1', 't2']);
    expect(outbox.sql).not.toMatch(/FOR UPDATE|LOCK IN SHARE MODE/);
    const consumed = ds.calls.find((c) => c.sql.includes('FROM consumed_event'))!;
    expect(consumed.params).toEqual(['g']);
    expect(s.filter).toEqual({ topics: ['t1', 't2'], consumerGroups: ['g'] });
  });

  it('on PostgreSQL: numbered placeholders, ages from EXTRACT(EPOCH ...), no TIMESTAMPDIFF or INTERVAL ? MICROSECOND', async () => {
    const ds = fakeDs({}, { type: 'postgres' });
    await collectStatus(ds, { topics: ['t1', 't2'], consumerGroups: ['g'] });
    const outbox = ds.calls.find((c) => c.sql.startsWith("SELECT 'count'"))!;
    expect(outbox.params).toEqual(['t1', 't2', 't1', 't2', 't1', 't2', 1_200_000_000, 't1', 't2']);
    expect(outbox.sql).toContain('topic IN ($1, $2)');
    expect(outbox.sql).toContain('o.topic IN ($8, $9)');
    expect(outbox.sql).toContain('EXTRACT(EPOCH FROM');
    expect(outbox.sql).not.toMatch(/TIMESTAMPDIFF|MICROSECOND|\?/);
    expect(ds.calls.find((c) => c.sql.includes('FROM tx_record'))!.sql).toContain('topic IN ($1, $2)');
    expect(ds.calls.find((c) => c.sql.includes('FROM consumed_event'))!.sql).toContain(
      'consumer_group IN ($1)',
    );
  });

  it('without a filter binds only the discard horizon, which the caller may set', async () => {
    const ds = fakeDs({});
    await collectStatus(ds);
    expect(ds.calls.map((c) => c.params)).toEqual(expect.arrayContaining([[], [], [1_200_000_000]]));
    const custom = fakeDs({});
    await collectStatus(custom, { discardHorizonMs: 60_000 });
    expect(custom.calls.find((c) => c.sql.startsWith("SELECT 'count'"))!.params).toEqual([60_000_000]);
    await expect(collectStatus(custom, { discardHorizonMs: 5 })).rejects.toThrow(/options.discardHorizonMs/);
  });

  it.each([
    [{ topics: [] }, 'options.topics'],
    [{ topics: 'orders' }, 'options.topics'],
    [{ topics: ['ok', 'bad name'] }, 'options.topics[1]'],
    [{ consumerGroups: [42] }, 'options.consumerGroups[0]'],
    [{ topic: ['x'] }, 'options.topic'],
    ['all', 'options'],
  ])('rejects %j naming %s', (options, option) => {
    expect(() => resolveStatusOptions(options)).toThrow(InvalidOptionError);
    try {
      resolveStatusOptions(options);
    } catch (err) {
      expect((err as InvalidOptionError).option).toBe(option);
    }
  });

  it('rejects something that is not a DataSource before any query', async () => {
    await expect(collectStatus({} as DataSource)).rejects.toMatchObject({ option: 'dataSource' });
  });

  it('refuses an uninitialized DataSource with a non-retriable StoreError', async () => {
    const ds = fakeDs({}, { initialized: false });
    await expect(collectStatus(ds)).rejects.toMatchObject({ code: 'STORE_ERROR', retriable: false });
    expect(ds.calls).toHaveLength(0);
  });

  it('wraps a failing query in a retriable StoreError that names the table and keeps the cause', async () => {
    const err = await collectStatus(fakeDs({}, { fail: 'outbox_event' })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as StoreError).retriable).toBe(true);
    expect((err as StoreError).message).toContain('outbox_event');
    expect(((err as StoreError).cause as { code: string }).code).toBe('ECONNRESET');
  });
});
