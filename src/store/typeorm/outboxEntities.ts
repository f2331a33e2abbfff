import { EntitySchema } from 'typeorm';
import { perDatabase, type SchemaTypes } from './columnTypes';

export type OutboxStatus = 'IN_FLIGHT' | 'NEW' | 'SENT' | 'DEAD' | 'CDC';

/**
 * A row of `outbox_event`: one per event, written in the producer's local transaction. It holds
 * everything needed to rebuild the exact message (same EVENT_ID / TX_ID properties and keys).
 */
export interface OutboxEvent {
  eventId: string;
  txId: string;
  topic: string;
  tag: string | null;
  /** JSON array of message keys. */
  keys: string;
  /** JSON object of message properties (TX_ID, TX_ORIGIN, EVENT_ID, ...). */
  properties: string;
  aggregateType: string | null;
  aggregateId: string | null;
  aggregateVersion: number | null;
  eventType: string | null;
  eventVersion: number | null;
  /** The message body as sent (the snapshot; for envelope events the envelope JSON). */
  payload: Buffer;
  occurredAt: Date;
  traceId: string | null;
  status: OutboxStatus;
  attempts: number;
  /** When the relay may take the row next; while leased, the end of the lease. */
  nextAttemptAt: Date;
  leaseUntil: Date | null;
  leaseOwner: string | null;
  publishedAt: Date | null;
  lastError: string | null;
}

/** The columns of outbox_event (shared with outbox_event_archive). */
export function outboxEventColumns(t: SchemaTypes): EntitySchema<OutboxEvent>['options']['columns'] {
  return {
    eventId: { name: 'event_id', type: 'char', length: 36, primary: true },
    txId: { name: 'tx_id', type: 'char', length: 36 },
    topic: { type: 'varchar', length: 255 },
    tag: { type: 'varchar', length: 128, nullable: true },
    keys: { type: 'text' },
    properties: { type: 'text' },
    aggregateType: { name: 'aggregate_type', type: 'varchar', length: 255, nullable: true },
    aggregateId: { name: 'aggregate_id', type: 'varchar', length: 255, nullable: true },
    aggregateVersion: { name: 'aggregate_version', type: 'bigint', nullable: true },
    eventType: { name: 'event_type', type: 'varchar', length: 255, nullable: true },
    eventVersion: { name: 'event_version', type: 'int', nullable: true },
    payload: { type: t.blob },
    occurredAt: { name: 'occurred_at', type: t.timestamp, precision: 3 },
    traceId: { name: 'trace_id', type: 'varchar', length: 64, nullable: true },
    status: { type: 'varchar', length: 16 },
    attempts: { type: 'int', default: 0 },
    nextAttemptAt: { name: 'next_attempt_at', type: t.timestamp, precision: 3 },
    leaseUntil: { name: 'lease_until', type: t.timestamp, precision: 3, nullable: true },
    leaseOwner: { name: 'lease_owner', type: 'varchar', length: 64, nullable: true },
    publishedAt: { name: 'published_at', type: t.timestamp, precision: 3, nullable: true },
    lastError: { name: 'last_error', type: 'text', nullable: true },
  };
}

function outboxEventEntity(t: SchemaTypes): EntitySchema<OutboxEvent> {
  return new EntitySchema<OutboxEvent>({
    name: 'OutboxEvent',
    tableName: 'outbox_event',
    columns: outboxEventColumns(t),
    indices: [
      { name: 'idx_outbox_status_next', columns: ['status', 'nextAttemptAt', 'eventId'] },
      { name: 'idx_outbox_tx', columns: ['txId'] },
      {
        name: 'uq_outbox_aggregate_version',
        columns: ['aggregateType', 'aggregateId', 'aggregateVersion'],
        unique: true,
      },
    ],
  });
}

/** The `outbox_event` entity for one database (the same instance on every call). */
export const outboxEventEntityFor = perDatabase(outboxEventEntity);

/** The MySQL/MariaDB `outbox_event` entity (outboxEventEntityFor('postgres') for PostgreSQL). */
export const OutboxEventEntity = outboxEventEntityFor('mysql');
