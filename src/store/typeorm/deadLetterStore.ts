import type { DataSource } from 'typeorm';
import { dialectFor, type Dialect, type DialectName } from './dialect';
import { SqlParams } from './sqlParams';

/** Which DEAD rows: by topic and/or eventId (both empty: every DEAD row). */
export interface DeadFilter {
  topics: readonly string[];
  eventIds: readonly string[];
}

/** One DEAD outbox row as the CLI shows it. */
export interface DeadEventRow {
  eventId: string;
  txId: string;
  topic: string;
  tag: string | null;
  aggregateType: string | null;
  aggregateId: string | null;
  aggregateVersion: number | null;
  eventType: string | null;
  attempts: number;
  occurredAt: string;
  /** Age on the database clock. */
  ageMs: number;
  lastError: string | null;
}

interface Row {
  event_id: string;
  tx_id: string;
  topic: string;
  tag: string | null;
  aggregate_type: string | null;
  aggregate_id: string | null;
  aggregate_version: string | number | null;
  event_type: string | null;
  attempts: number | string;
  occurred_at: Date | string;
  age_ms: number | string;
  last_error: string | null;
}

/** Milliseconds since occurred_at, on the database clock. */
const AGE_MS: Record<DialectName, string> = {
  mysql: 'TIMESTAMPDIFF(MICROSECOND, occurred_at, CURRENT_TIMESTAMP(3)) / 1000',
  postgres: 'EXTRACT(EPOCH FROM (CURRENT_TIMESTAMP(3) - occurred_at)) * 1000',
};

function where(p: SqlParams, filter: DeadFilter, afterId?: string): string {
  const parts = ["status = 'DEAD'"];
  if (filter.topics.length > 0) parts.push(`topic IN (${p.list(filter.topics)})`);
  if (filter.eventIds.length > 0) parts.push(`event_id IN (${p.list(filter.eventIds)})`);
  if (afterId !== undefined) parts.push(`event_id > ${p.add(afterId)}`);
  return parts.join(' AND ');
}

/** The dead-letter commands' reads of outbox_event (replaying is TypeOrmOutboxStore.replayDead). */
export class TypeOrmDeadLetterReader {
  private readonly dialect: Dialect;

  constructor(private readonly ds: DataSource) {
    this.dialect = dialectFor(ds);
  }

  /** DEAD rows in event_id order (UUIDv7: creation order), keyset-paginated. */
  async list(filter: DeadFilter, limit: number, afterId?: string): Promise<DeadEventRow[]> {
    const p = new SqlParams(this.dialect);
    const w = where(p, filter, afterId);
    const rows: Row[] = await this.ds.query(
      `SELECT event_id, tx_id, topic, tag, aggregate_type, aggregate_id, aggregate_version, event_type,
         attempts, occurred_at, ${AGE_MS[this.dialect.name]} AS age_ms, last_error
       FROM outbox_event WHERE ${w} ORDER BY event_id LIMIT ${p.add(Math.trunc(limit))}`,
      p.values,
    );
    return rows.map((r) => ({
      eventId: r.event_id,
      txId: r.tx_id,
      topic: r.topic,
      tag: r.tag,
      aggregateType: r.aggregate_type,
      aggregateId: r.aggregate_id,
      aggregateVersion: r.aggregate_version === null ? null : Number(r.aggregate_version),
      eventType: r.event_type,
      attempts: Number(r.attempts),
      occurredAt: new Date(r.occurred_at).toISOString(),
      ageMs: Math.round(Number(r.age_ms)),
      lastError: r.last_error,
    }));
  }

  async count(filter: DeadFilter): Promise<number> {
    const p = new SqlParams(this.dialect);
    const rows: Array<{ n: number | string }> = await this.ds.query(
      `SELECT COUNT(*) AS n FROM outbox_event WHERE ${where(p, filter)}`,
      p.values,
    );
    return Number(rows[0]?.n ?? 0);
  }

  /** The status of each of these events that exists. */
  async statusOf(eventIds: readonly string[]): Promise<Map<string, string>> {
    if (eventIds.length === 0) return new Map();
    const p = new SqlParams(this.dialect);
    const rows: Array<{ event_id: string; status: string }> = await this.ds.query(
      `SELECT event_id, status FROM outbox_event WHERE event_id IN (${p.list(eventIds)})`,
      p.values,
    );
    return new Map(rows.map((x) => [x.event_id, x.status]));
  }
}
