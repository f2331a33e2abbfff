import type { DataSource, EntityManager } from 'typeorm';
import type { NewOutboxEvent } from '../ports';
import type { OutboxStatus } from './outboxEntities';
import { dialectFor, type Dialect, type DialectName } from './dialect';
import { SqlParams } from './sqlParams';
import { outboxRowValues } from './statements';
import { probeTable } from './tableProbe';
import { toStoreError } from './storeError';

/** What a fact reconciliation needs to find: an event of this type for this aggregate (and version). */
export interface FactKey {
  aggregateType: string;
  aggregateId: string;
  eventType: string;
  aggregateVersion?: number;
}

/** One outbox row (live or archived) that may satisfy a fact. */
export interface FactEventRow {
  eventId: string;
  aggregateType: string;
  aggregateId: string;
  aggregateVersion: number | null;
  eventType: string | null;
  /** Archived rows are SENT by construction. */
  status: OutboxStatus;
}

interface RawRow {
  event_id: string;
  aggregate_type: string;
  aggregate_id: string;
  aggregate_version: string | number | null;
  event_type: string | null;
  status: string;
}

export const OUTBOX_ARCHIVE_TABLE = 'outbox_event_archive';

/** The per-database parts of the reconciler's statements. */
interface FactSql {
  /** The outbox column `keys` (a reserved word on MySQL). */
  keysColumn: string;
  /** Ends an INSERT so that a row refused by any unique key is skipped, every other error still thrown. */
  skipDuplicates: string;
}

const FACT_SQL: Record<DialectName, FactSql> = {
  // A no-op update on a duplicate key.
  mysql: { keysColumn: '`keys`', skipDuplicates: 'ON DUPLICATE KEY UPDATE event_id = event_id' },
  // No error, so the transaction is not aborted (a failed statement aborts a PostgreSQL transaction).
  postgres: { keysColumn: '"keys"', skipDuplicates: 'ON CONFLICT DO NOTHING' },
};

/**
 * The outbox side of a fact reconciliation, in raw SQL. Lookups are one statement per page,
 * a range read on the prefix (aggregate_type, aggregate_id) of uq_outbox_aggregate_version (and of
 * idx_outbox_archive_aggregate on the archive).
 */
export class TypeOrmFactStore {
  private readonly dialect: Dialect;

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectFor(dataSource);
  }

  /**
   * Whether the opt-in archive table exists in the DataSource's database. Asked by reading it, not
   * information_schema, which hides a table the user has no privilege on: an archive the user
   * cannot read is an error (StoreAccessDeniedError), never "no archive".
   */
  async archiveExists(): Promise<boolean> {
    try {
      await probeTable(this.dataSource, OUTBOX_ARCHIVE_TABLE);
      return true;
    } catch (err) {
      const kind = this.dialect.classify(err);
      if (kind === 'NO_SUCH_TABLE') return false;
      throw toStoreError(
        kind === 'ACCESS_DENIED'
          ? `cannot tell whether ${OUTBOX_ARCHIVE_TABLE} exists (includeArchive: false / --no-archive if you do not archive)`
          : `could not tell whether ${OUTBOX_ARCHIVE_TABLE} exists`,
        err,
      );
    }
  }

  /** Every row, live or archived, of the facts' aggregates (filtered to their event types). */
  async findRows(
    facts: readonly FactKey[],
    withArchive: boolean,
    manager: EntityManager = this.dataSource.manager,
  ): Promise<FactEventRow[]> {
    if (facts.length === 0) return [];
    const p = new SqlParams(this.dialect);
    const columns = 'event_id, aggregate_type, aggregate_id, aggregate_version, event_type';
    let sql = `SELECT ${columns}, status FROM outbox_event WHERE ${aggregateFilter(p, facts)}`;
    if (withArchive) {
      sql += ` UNION ALL SELECT ${columns}, 'SENT' AS status FROM ${OUTBOX_ARCHIVE_TABLE} WHERE ${aggregateFilter(p, facts)}`;
    }
    const rows: RawRow[] = await manager.query(sql, p.values);
    return rows.map((r) => ({
      eventId: r.event_id,
      aggregateType: r.aggregate_type,
      aggregateId: r.aggregate_id,
      aggregateVersion: r.aggregate_version === null ? null : Number(r.aggregate_version),
      eventType: r.event_type,
      status: r.status as OutboxStatus,
    }));
  }

  /**
   * Inside `manager`'s transaction: inserts the rows and their COMMITTED tx_records (one per
   * row). A row refused by a unique key (its eventId, or its aggregate version, exists) is
   * skipped, not an error, and gets no tx_record. Returns the eventIds that were written.
   */
  async insertMissing(
    manager: EntityManager,
    rows: readonly NewOutboxEvent[],
    producerGroup: string,
  ): Promise<Set<string>> {
    if (rows.length === 0) return new Set();
    const now = this.dialect.nowExpression;
    const sql = FACT_SQL[this.dialect.name];
    const p = new SqlParams(this.dialect);
    const values = rows
      .map((e) => {
        const v = outboxRowValues(e).map((x) => p.add(x));
        return `(${v.join(', ')}, COALESCE(${p.add(e.occurredAt ?? null)}, ${now}), ${p.add(e.traceId ?? null)}, 'NEW', 0, ${now})`;
      })
      .join(', ');
    await manager.query(
      `INSERT INTO outbox_event (event_id, tx_id, topic, tag, ${sql.keysColumn}, properties, aggregate_type,
         aggregate_id, aggregate_version, event_type, event_version, payload, occurred_at, trace_id,
         status, attempts, next_attempt_at)
       VALUES ${values} ${sql.skipDuplicates}`,
      p.values,
    );
    // Ours only if the row with that eventId carries our new txId (a reused eventId does not).
    const q = new SqlParams(this.dialect);
    const landed: Array<{ event_id: string; tx_id: string }> = await manager.query(
      `SELECT event_id, tx_id FROM outbox_event WHERE event_id IN (${q.list(rows.map((r) => r.eventId))})`,
      q.values,
    );
    const txOf = new Map(rows.map((r) => [r.eventId, r.txId]));
    const written = landed.filter((r) => txOf.get(r.event_id) === r.tx_id);
    if (written.length > 0) {
      const byId = new Map(rows.map((r) => [r.eventId, r]));
      // The fence row: a lost commit of the relay's half message is answered COMMIT by the group.
      const t = new SqlParams(this.dialect);
      const tuples = written.map(
        (w) =>
          `(${t.add(w.tx_id)}, 'COMMITTED', 'PRODUCER', ${t.add(producerGroup)}, ${t.add(byId.get(w.event_id)!.topic)}, 1)`,
      );
      await manager.query(
        `INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count)
         VALUES ${tuples.join(', ')}`,
        t.values,
      );
    }
    return new Set(written.map((w) => w.event_id));
  }
}

/** `(aggregate_type = ? AND aggregate_id IN (...) AND event_type IN (...)) OR ...`, a group per aggregate type. */
function aggregateFilter(p: SqlParams, facts: readonly FactKey[]): string {
  const byType = new Map<string, { ids: Set<string>; types: Set<string> }>();
  for (const f of facts) {
    let group = byType.get(f.aggregateType);
    if (!group) byType.set(f.aggregateType, (group = { ids: new Set(), types: new Set() }));
    group.ids.add(f.aggregateId);
    group.types.add(f.eventType);
  }
  const parts: string[] = [];
  for (const [type, { ids, types }] of byType) {
    parts.push(
      `(aggregate_type = ${p.add(type)} AND aggregate_id IN (${p.list([...ids])}) AND event_type IN (${p.list([...types])}))`,
    );
  }
  return parts.join(' OR ');
}
