import { mysqlTxRecordSql } from '../../src/store/typeorm/mysql/txRecordSql';
import { postgresTxRecordSql } from '../../src/store/typeorm/postgres/txRecordSql';
import type { Statement } from '../../src/store/typeorm/statements';
import type { TxRecordSql } from '../../src/store/typeorm/txRecordSql';

/** tx_record statements of each database: placeholders match parameters; the scope is bounded as documented. */
const record = { txId: 't', producerGroup: 'g', topic: 'topic', eventCount: 2 };

function statements(sql: TxRecordSql): Record<string, Statement> {
  const scope = sql.tombstoneScope(1500);
  return {
    insert: sql.insert(record, 'ROLLED_BACK', 'CHECK_BACK'),
    selectStatus: sql.selectStatus('t'),
    selectStatuses: sql.selectStatuses(['a', 'b', 'c']),
    insertTombstones: sql.insertTombstones([record, { ...record, txId: 'u' }, { ...record, txId: 'v' }]),
    markConfirmed: sql.markConfirmed(['a', 'b', 'c']),
    open: scope.open,
    close: scope.close,
    abort: scope.abort,
  };
}

describe('tx_record statements', () => {
  it.each(Object.entries(statements(mysqlTxRecordSql)))('MySQL %s: one ? per parameter', (_name, s) => {
    expect(s.sql.match(/\?/g)?.length ?? 0).toBe(s.params.length);
    expect(s.sql).not.toMatch(/\$\d/);
  });

  it.each(Object.entries(statements(postgresTxRecordSql)))(
    'PostgreSQL %s: $1..$n used exactly, no ?, no backticks',
    (_name, s) => {
      const used = new Set((s.sql.match(/\$(\d+)/g) ?? []).map((m) => Number(m.slice(1))));
      expect([...used].sort((a, b) => a - b)).toEqual(s.params.map((_, i) => i + 1));
      expect(s.sql).not.toMatch(/\?|`|ON DUPLICATE KEY/);
    },
  );

  it('batched tombstones skip a duplicate, never overwrite it, and never hide other errors', () => {
    const rows = [record, { ...record, txId: 'u' }];
    expect(mysqlTxRecordSql.insertTombstones(rows).sql).toMatch(/ON DUPLICATE KEY UPDATE tx_id = tx_id$/);
    expect(mysqlTxRecordSql.insertTombstones(rows).sql).not.toMatch(/IGNORE/);
    expect(postgresTxRecordSql.insertTombstones(rows).sql).toMatch(/ON CONFLICT \(tx_id\) DO NOTHING$/);
    for (const sql of [mysqlTxRecordSql, postgresTxRecordSql])
      expect(sql.insertTombstones(rows).sql.match(/'ROLLED_BACK', 'CHECK_BACK'/g)).toHaveLength(2);
  });

  it('PostgreSQL: a duplicate is skipped, never an error (it would abort the caller transaction)', () => {
    expect(postgresTxRecordSql.insert(record, 'COMMITTED', 'PRODUCER').sql).toMatch(
      /ON CONFLICT \(tx_id\) DO NOTHING RETURNING tx_id$/,
    );
    expect(postgresTxRecordSql.inserted({ rows: [], affected: 0 })).toBe(false);
    expect(postgresTxRecordSql.inserted({ rows: [{ tx_id: 't' }], affected: 1 })).toBe(true);
  });

  it('the lock-wait bound: whole seconds on MySQL (rounded up, at least 1; 0 is "do not wait"), milliseconds on PostgreSQL', () => {
    expect(mysqlTxRecordSql.tombstoneScope(1500).open.sql).toMatch(/innodb_lock_wait_timeout = 2$/);
    expect(mysqlTxRecordSql.tombstoneScope(1).open.sql).toMatch(/innodb_lock_wait_timeout = 1$/);
    expect(mysqlTxRecordSql.tombstoneScope(0).open.sql).toMatch(/innodb_lock_wait_timeout = 0$/);
    const pg = postgresTxRecordSql.tombstoneScope(1500);
    expect(pg.open.sql).toBe("BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '1500ms'");
    expect(postgresTxRecordSql.tombstoneScope(0).open.sql).toMatch(/'1ms'$/);
    expect([pg.close.sql, pg.abort.sql]).toEqual(['COMMIT', 'ROLLBACK']);
  });
});
