import type { DataSource } from 'typeorm';
import { collectStatus } from '../../src';
import { TypeOrmDeadLetterReader } from '../../src/store/typeorm/deadLetterStore';
import { doctorQueries } from '../../src/store/typeorm/doctorQueries';
import { TypeOrmFactStore } from '../../src/store/typeorm/outboxFacts';
import { TypeOrmRetentionStore } from '../../src/store/typeorm/retentionStore';

/**
 * Every statement of the operational stores (retention, status, dead-letter reads, doctor,
 * reconciler facts), run against a recording DataSource of each database: placeholders and
 * parameters match one to one, and no MySQL syntax reaches PostgreSQL (or the reverse). The
 * contract suite runs them for real.
 */
interface Call {
  sql: string;
  params: unknown[];
}

function recorder(type: 'mysql' | 'postgres'): { ds: DataSource; calls: Call[] } {
  const calls: Call[] = [];
  const query = async (sql: string, params: unknown[] = []) => {
    calls.push({ sql, params });
    if (/^\s*(WITH|SELECT)/.test(sql)) return [];
    return type === 'postgres' ? [[], 0] : { affectedRows: 0 };
  };
  const manager = { query };
  const ds = {
    options: { type },
    isInitialized: true,
    createQueryRunner: () => ({}),
    query,
    manager,
    transaction: async (_level: unknown, fn: (m: typeof manager) => Promise<unknown>) => fn(manager),
  };
  return { ds: ds as unknown as DataSource, calls };
}

const ages = { outboxMs: 1000, txRecordMs: 2000, consumedMs: 3000 };
const fact = { aggregateType: 'A', aggregateId: 'a', eventType: 'E' };
const row = (n: number) => ({
  eventId: `e${n}`,
  txId: `t${n}`,
  topic: 'topic',
  keys: ['k'],
  properties: { A: 'b' },
  body: Buffer.from('x'),
  status: 'NEW' as const,
});

async function runAll(ds: DataSource): Promise<void> {
  const retention = new TypeOrmRetentionStore(ds);
  for (const table of ['outbox_event', 'tx_record', 'consumed_event'] as const) {
    await retention.count(table, ages);
    await retention.deleteBatch(table, ages, 10);
  }
  await retention.archiveBatch(ages, 10);
  await collectStatus(ds, { topics: ['t1', 't2'], consumerGroups: ['g'] });
  await collectStatus(ds);
  const dead = new TypeOrmDeadLetterReader(ds);
  await dead.list({ topics: ['t1'], eventIds: ['e1', 'e2'] }, 10, 'e0');
  await dead.list({ topics: [], eventIds: [] }, 10);
  await dead.count({ topics: ['t1', 't2'], eventIds: [] });
  await dead.statusOf(['e1', 'e2']);
  const facts = new TypeOrmFactStore(ds);
  await facts.findRows([fact, { ...fact, aggregateId: 'b' }, { ...fact, aggregateType: 'B' }], true);
  await facts.insertMissing(ds.manager, [row(1), row(2)], 'group');
  const q = doctorQueries(ds);
  await q.schema(ds, ['tx_record', 'outbox_event']);
  await q.grants(ds, ['tx_record']).catch(() => undefined);
  await q.oldestSentAgeUs(ds);
  await q.clock(ds);
}

describe('operational statements', () => {
  it('MySQL/MariaDB: one ? per parameter, no PostgreSQL syntax', async () => {
    const { ds, calls } = recorder('mysql');
    await runAll(ds);
    expect(calls.length).toBeGreaterThan(20);
    for (const c of calls) {
      expect([c.sql, (c.sql.match(/\?/g) ?? []).length]).toEqual([c.sql, c.params.length]);
      expect(c.sql).not.toMatch(/\$\d|ON CONFLICT|EXTRACT\(EPOCH|MATERIALIZED|current_schema/);
    }
  });

  it('PostgreSQL: $1..$n with n parameters, no ?, backticks, DELETE ... LIMIT, FOR UPDATE or MySQL functions', async () => {
    const { ds, calls } = recorder('postgres');
    await runAll(ds);
    expect(calls.length).toBeGreaterThan(20);
    for (const c of calls) {
      const used = new Set([...c.sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
      expect([c.sql, [...used].sort((a, b) => a - b)]).toEqual([
        c.sql,
        Array.from({ length: c.params.length }, (_, i) => i + 1),
      ]);
      expect(c.sql).not.toMatch(
        /\?|`|ON DUPLICATE KEY|MICROSECOND|TIMESTAMPDIFF|UNIX_TIMESTAMP|DATABASE\(\)|@@|SHOW GRANTS|FOR UPDATE/,
      );
      // No DELETE ... LIMIT: a LIMIT in a DELETE statement sits in its key subselect.
      if (/^\s*DELETE/.test(c.sql)) expect(c.sql).not.toMatch(/LIMIT/);
    }
  });
});
