import { InvalidMessageError } from '../../errors';
import type { DataSource, EntityManager } from 'typeorm';
import type {
  ClaimedOutboxEvent,
  ClaimOptions,
  ClaimUnconfirmedOptions,
  NewOutboxEvent,
  OutboxStore,
} from '../ports';
import { dialectFor, type Dialect } from './dialect';

const INSERT_COLUMNS =
  '(event_id, tx_id, topic, tag, `keys`, properties, aggregate_type, aggregate_id, aggregate_version,' +
  ' event_type, event_version, payload, occurred_at, trace_id, status, attempts, next_attempt_at)';
const MAX_ERROR_CHARS = 2000;

interface ClaimedRow {
  event_id: string;
  tx_id: string;
  topic: string;
  tag: string | null;
  keys: string;
  properties: string;
  payload: Buffer;
  aggregate_id: string | null;
  attempts: number;
}

/**
 * outbox_event through the user's DataSource, in raw SQL (MySQL/MariaDB 8.0+/10.6+: SKIP LOCKED).
 * Every relay statement is a range read on (status, next_attempt_at, event_id) or a PK update.
 */
export class TypeOrmOutboxStore implements OutboxStore {
  private readonly dialect: Dialect;

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectFor(dataSource);
  }

  async insertEvents(manager: EntityManager, events: readonly NewOutboxEvent[]): Promise<void> {
    if (events.length === 0) return;
    const now = this.dialect.nowExpression;
    const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, COALESCE(?, ${now}), ?, ?, 0, ${now})`;
    const params: unknown[] = [];
    for (const e of events) {
      params.push(
        e.eventId,
        e.txId,
        e.topic,
        e.tag ?? null,
        JSON.stringify(e.keys),
        JSON.stringify(e.properties),
        e.aggregateType ?? null,
        e.aggregateId ?? null,
        e.aggregateVersion ?? null,
        e.eventType ?? null,
        e.eventVersion ?? null,
        e.body,
        e.occurredAt ?? null,
        e.traceId ?? null,
        e.status,
      );
    }
    try {
      await manager.query(
        `INSERT INTO outbox_event ${INSERT_COLUMNS} VALUES ${events.map(() => row).join(', ')}`,
        params,
      );
    } catch (err) {
      if (this.dialect.classify(err) !== 'DUPLICATE_KEY') throw err;
      // An eventId, or an aggregate version, that was already published: a caller bug, not a retry case.
      const key = /Duplicate entry '([^']{0,80})/.exec(err instanceof Error ? err.message : '')?.[1];
      throw new InvalidMessageError(
        'events',
        key ?? '(duplicate key)',
        'events whose eventId and (aggregateType, aggregateId, aggregateVersion) were not published before',
        err,
      );
    }
  }

  async markConfirmed(eventIds: readonly string[]): Promise<void> {
    if (eventIds.length === 0) return;
    // NEW too: a row promoted by the discard reconciliation whose commit was confirmed late.
    await this.dataSource.query(
      `UPDATE outbox_event SET status = 'SENT', published_at = ${this.dialect.nowExpression},
         lease_until = NULL, lease_owner = NULL
       WHERE status IN ('IN_FLIGHT', 'NEW') AND event_id IN (${eventIds.map(() => '?').join(', ')})`,
      [...eventIds],
    );
  }

  async claim({ limit, leaseMs, owner, topics }: ClaimOptions): Promise<ClaimedOutboxEvent[]> {
    // READ COMMITTED: the claim locks only the rows it takes. Under REPEATABLE READ its range scan
    // also took gap locks on idx_outbox_status_next, where producers insert their NEW rows: the
    // two deadlocked now and then (transact failed with a StoreError while a relay claimed).
    const rows = await this.dataSource.transaction('READ COMMITTED', async (manager) => {
      const ids: Array<{ event_id: string }> = await manager.query(
        `SELECT event_id FROM outbox_event
         WHERE status = 'NEW' AND next_attempt_at <= ${this.dialect.nowExpression}
           AND topic IN (${topics.map(() => '?').join(', ')})
         ORDER BY next_attempt_at, event_id LIMIT ${Math.trunc(limit)} FOR UPDATE SKIP LOCKED`,
        [...topics],
      );
      if (ids.length === 0) return [];
      const list = ids.map(() => '?').join(', ');
      const params = ids.map((r) => r.event_id);
      await manager.query(
        `UPDATE outbox_event SET lease_owner = ?, lease_until = ${this.plusMs()},
           next_attempt_at = ${this.plusMs()}
         WHERE event_id IN (${list})`,
        [owner, leaseMs * 1000, leaseMs * 1000, ...params],
      );
      return readClaimed(manager, params);
    });
    return rows.map(claimedEvent);
  }

  async claimUnconfirmed({
    producerGroup,
    horizonMs,
    limit,
    leaseMs,
    owner,
    topics,
  }: ClaimUnconfirmedOptions): Promise<ClaimedOutboxEvent[]> {
    const now = this.dialect.nowExpression;
    // READ COMMITTED, as the relay's claim: record locks only, no gap locks where producers insert.
    const rows = await this.dataSource.transaction('READ COMMITTED', async (manager) => {
      // The subquery is a plain read: only outbox rows are locked (tx_record stays free for the fence).
      const ids: Array<{ event_id: string }> = await manager.query(
        `SELECT o.event_id FROM outbox_event o
         WHERE o.status = 'IN_FLIGHT' AND o.next_attempt_at <= ${this.plusMs(-1)}
           AND (o.lease_until IS NULL OR o.lease_until <= ${now})
           AND o.topic IN (${topics.map(() => '?').join(', ')})
           AND EXISTS (SELECT 1 FROM tx_record t
                       WHERE t.tx_id = o.tx_id AND t.status = 'COMMITTED' AND t.producer_group = ?)
         ORDER BY o.next_attempt_at, o.event_id LIMIT ${Math.trunc(limit)} FOR UPDATE SKIP LOCKED`,
        [horizonMs * 1000, ...topics, producerGroup],
      );
      if (ids.length === 0) return [];
      const params = ids.map((r) => r.event_id);
      await manager.query(
        `UPDATE outbox_event SET lease_owner = ?, lease_until = ${this.plusMs()}
         WHERE status = 'IN_FLIGHT' AND event_id IN (${params.map(() => '?').join(', ')})`,
        [owner, leaseMs * 1000, ...params],
      );
      return readClaimed(manager, params);
    });
    return rows.map(claimedEvent);
  }

  async releaseUnconfirmed(eventId: string, owner: string, error: string, retryInMs: number): Promise<void> {
    // Fenced by owner, as markFailed: a holder whose lease expired must not reschedule another's.
    await this.dataSource.query(
      `UPDATE outbox_event SET attempts = attempts + 1, last_error = ?, lease_until = ${this.plusMs()},
         lease_owner = NULL
       WHERE event_id = ? AND status = 'IN_FLIGHT' AND lease_owner = ?`,
      [error.slice(0, MAX_ERROR_CHARS), retryInMs * 1000, eventId, owner],
    );
  }

  async markSent(eventId: string): Promise<void> {
    // Not fenced by owner: the message is on the broker whoever holds the lease now.
    await this.dataSource.query(
      `UPDATE outbox_event SET status = 'SENT', published_at = ${this.dialect.nowExpression},
         lease_until = NULL, lease_owner = NULL, last_error = NULL
       WHERE event_id = ? AND status IN ('NEW', 'IN_FLIGHT')`,
      [eventId],
    );
  }

  async markFailed(
    eventId: string,
    owner: string,
    error: string,
    retryInMs: number,
    dead: boolean,
  ): Promise<void> {
    // Fenced by owner: a relay whose lease expired must not overwrite the new holder's schedule.
    await this.dataSource.query(
      `UPDATE outbox_event SET attempts = attempts + 1, last_error = ?, status = ?,
         next_attempt_at = ${this.plusMs()}, lease_until = NULL, lease_owner = NULL
       WHERE event_id = ? AND status = 'NEW' AND lease_owner = ?`,
      [error.slice(0, MAX_ERROR_CHARS), dead ? 'DEAD' : 'NEW', retryInMs * 1000, eventId, owner],
    );
  }

  async promoteUnconfirmed(horizonMs: number, limit: number, topics: readonly string[]): Promise<number> {
    return this.dataSource.transaction('READ COMMITTED', async (manager) => {
      // The subquery is a plain read: only outbox rows are locked (tx_record stays free for the fence).
      const rows: Array<{ event_id: string }> = await manager.query(
        `SELECT o.event_id FROM outbox_event o
         WHERE o.status = 'IN_FLIGHT' AND o.next_attempt_at <= ${this.plusMs(-1)}
           AND (o.lease_until IS NULL OR o.lease_until <= ${this.dialect.nowExpression})
           AND o.topic IN (${topics.map(() => '?').join(', ')})
           AND EXISTS (SELECT 1 FROM tx_record t WHERE t.tx_id = o.tx_id AND t.status = 'COMMITTED')
         ORDER BY o.next_attempt_at, o.event_id LIMIT ${Math.trunc(limit)} FOR UPDATE SKIP LOCKED`,
        [horizonMs * 1000, ...topics],
      );
      if (rows.length === 0) return 0;
      await manager.query(
        `UPDATE outbox_event SET status = 'NEW', next_attempt_at = ${this.dialect.nowExpression},
           last_error = 'broker commit not confirmed within the check-back horizon'
         WHERE status = 'IN_FLIGHT' AND event_id IN (${rows.map(() => '?').join(', ')})`,
        rows.map((r) => r.event_id),
      );
      return rows.length;
    });
  }

  async replayDead(eventIds?: readonly string[]): Promise<number> {
    const filter =
      eventIds === undefined ? '' : ` AND event_id IN (${eventIds.map(() => '?').join(', ') || 'NULL'})`;
    const result: unknown = await this.dataSource.query(
      `UPDATE outbox_event SET status = 'NEW', attempts = 0, next_attempt_at = ${this.dialect.nowExpression}
       WHERE status = 'DEAD'${filter}`,
      eventIds ? [...eventIds] : [],
    );
    return affectedRows(result);
  }

  /** now ± a parameter in microseconds (sign -1: now minus). */
  private plusMs(sign: 1 | -1 = 1): string {
    return `(${this.dialect.nowExpression} ${sign === 1 ? '+' : '-'} INTERVAL ? MICROSECOND)`;
  }
}

/** The rows just leased, in claim order, with what is needed to rebuild each message. */
function readClaimed(manager: EntityManager, eventIds: string[]): Promise<ClaimedRow[]> {
  return manager.query(
    `SELECT event_id, tx_id, topic, tag, \`keys\`, properties, payload, aggregate_id, attempts
     FROM outbox_event WHERE event_id IN (${eventIds.map(() => '?').join(', ')})
     ORDER BY next_attempt_at, event_id`,
    eventIds,
  );
}

function claimedEvent(r: ClaimedRow): ClaimedOutboxEvent {
  return {
    eventId: r.event_id,
    txId: r.tx_id,
    topic: r.topic,
    ...(r.tag !== null ? { tag: r.tag } : {}),
    keys: JSON.parse(r.keys) as string[],
    properties: JSON.parse(r.properties) as Record<string, string>,
    body: Buffer.from(r.payload),
    ...(r.aggregate_id !== null ? { aggregateId: r.aggregate_id } : {}),
    attempts: Number(r.attempts),
  };
}

function affectedRows(result: unknown): number {
  const r = result as { affectedRows?: number } | undefined;
  return typeof r?.affectedRows === 'number' ? r.affectedRows : 0;
}
