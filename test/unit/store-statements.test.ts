import type { CursorKey, ConsumedRow, NewOutboxEvent } from '../../src/store/ports';
import { mysqlInboxSql } from '../../src/store/typeorm/mysql/inboxSql';
import { mysqlOutboxSql } from '../../src/store/typeorm/mysql/outboxSql';
import { postgresInboxSql } from '../../src/store/typeorm/postgres/inboxSql';
import { postgresOutboxSql } from '../../src/store/typeorm/postgres/outboxSql';
import type { InboxSql, OutboxSql, Statement } from '../../src/store/typeorm/statements';

/**
 * Every statement of each database's store, built with sample arguments: its placeholders and its
 * parameters must match one to one (a `?` too many, or a `$n` out of range, only fails at run time
 * on that database). The contract suite runs them for real.
 */
const event = (n: number): NewOutboxEvent => ({
  eventId: `e${n}`,
  txId: 't',
  topic: 'topic',
  keys: ['k'],
  properties: { A: 'b' },
  body: Buffer.from('x'),
  status: 'NEW',
});
const row: ConsumedRow = {
  consumerGroup: 'g',
  eventId: 'e',
  eventType: 'T',
  aggregateType: 'A',
  aggregateId: 'a',
  aggregateVersion: 1,
};
const key: CursorKey = { consumerGroup: 'g', aggregateType: 'A', aggregateId: 'a' };

function outboxStatements(sql: OutboxSql): Record<string, Statement> {
  return {
    insertEvents1: sql.insertEvents([event(1)]),
    insertEvents3: sql.insertEvents([event(1), event(2), event(3)]),
    markConfirmed: sql.markConfirmed(['a', 'b']),
    selectDue: sql.selectDue(['t1', 't2'], 10),
    leaseDue: sql.leaseDue(['a', 'b', 'c'], 'owner', 1000),
    selectUnconfirmed: sql.selectUnconfirmed({ horizonMs: 1, topics: ['t1', 't2'], limit: 5 }),
    selectUnconfirmedOfGroup: sql.selectUnconfirmed({
      horizonMs: 1,
      topics: ['t1'],
      limit: 5,
      producerGroup: 'g',
    }),
    leaseUnconfirmed: sql.leaseUnconfirmed(['a'], 'owner', 1000),
    releaseUnconfirmed: sql.releaseUnconfirmed('a', 'owner', 'err', 10),
    markSent: sql.markSent('a'),
    markSentMany: sql.markSentMany(['a', 'b']),
    markFailed: sql.markFailed('a', 'owner', 'err', 10, true),
    promote: sql.promote(['a', 'b']),
    replayDeadAll: sql.replayDead(),
    replayDeadSome: sql.replayDead(['a', 'b']),
    replayDeadNone: sql.replayDead([]),
  };
}

function inboxStatements(sql: InboxSql): Record<string, Statement> {
  return {
    insertConsumed: sql.insertConsumed(row),
    markOutcome: sql.markOutcome(row, 'STALE'),
    lockCursor: sql.lockCursor(key),
    advanceCursor: sql.advanceCursor(key, 2, 1),
  };
}

describe('store statements: placeholders match parameters', () => {
  it.each(Object.entries({ ...outboxStatements(mysqlOutboxSql), ...inboxStatements(mysqlInboxSql) }))(
    'MySQL %s: one ? per parameter, no $n',
    (_name, s) => {
      expect(s.sql.match(/\?/g)?.length ?? 0).toBe(s.params.length);
      expect(s.sql).not.toMatch(/\$\d/);
    },
  );

  it.each(Object.entries({ ...outboxStatements(postgresOutboxSql), ...inboxStatements(postgresInboxSql) }))(
    'PostgreSQL %s: $1..$n used exactly, no ?, no backticks',
    (_name, s) => {
      const used = new Set((s.sql.match(/\$(\d+)/g) ?? []).map((m) => Number(m.slice(1))));
      expect([...used].sort((a, b) => a - b)).toEqual(s.params.map((_, i) => i + 1));
      expect(s.sql).not.toMatch(/\?|`|ON DUPLICATE KEY|MICROSECOND/);
    },
  );

  it('the PostgreSQL dedupe insert never fails on a duplicate (it would abort the transaction)', () => {
    expect(postgresInboxSql.insertConsumed(row).sql).toMatch(
      /ON CONFLICT \(consumer_group, event_id\) DO NOTHING/,
    );
    expect(postgresInboxSql.inserted({ rows: [], affected: 0 })).toBe(false);
    expect(postgresInboxSql.inserted({ rows: [{ inserted: 1 }], affected: 1 })).toBe(true);
    expect(postgresInboxSql.isolation).toBe('READ COMMITTED');
  });
});
