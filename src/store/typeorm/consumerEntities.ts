import { EntitySchema } from 'typeorm';
import { perDatabase, type SchemaTypes } from './columnTypes';

/** A row of `consumed_event`: one per (consumer group, event) the consumer has decided on. */
export interface ConsumedEvent {
  consumerGroup: string;
  eventId: string;
  eventType: string;
  aggregateType: string;
  aggregateId: string;
  aggregateVersion: string;
  /** APPLIED (handler ran), STALE (older than the cursor) or IGNORED (no handler, ignore policy). */
  outcome: 'APPLIED' | 'STALE' | 'IGNORED';
  consumedAt: Date;
}

/** A row of `aggregate_cursor`: the last applied aggregateVersion per (group, aggregate). */
export interface AggregateCursor {
  consumerGroup: string;
  aggregateType: string;
  aggregateId: string;
  /** BIGINT, returned by the mysql driver as a string. */
  lastVersion: string;
  /** Versions passed over by the 'accept' gap policy (0 under 'hold'). */
  skippedVersions: string;
  updatedAt: Date;
}

function consumedEventEntity(t: SchemaTypes): EntitySchema<ConsumedEvent> {
  return new EntitySchema<ConsumedEvent>({
    name: 'ConsumedEvent',
    tableName: 'consumed_event',
    columns: {
      consumerGroup: { name: 'consumer_group', type: 'varchar', length: 255, primary: true },
      eventId: { name: 'event_id', type: 'char', length: 36, primary: true },
      eventType: { name: 'event_type', type: 'varchar', length: 128 },
      aggregateType: { name: 'aggregate_type', type: 'varchar', length: 128 },
      aggregateId: { name: 'aggregate_id', type: 'varchar', length: 128 },
      aggregateVersion: { name: 'aggregate_version', type: 'bigint' },
      outcome: { type: 'varchar', length: 16 },
      consumedAt: {
        name: 'consumed_at',
        type: t.timestamp,
        precision: 3,
        default: () => t.now,
      },
    },
    indices: [{ name: 'idx_consumed_event_consumed_at', columns: ['consumedAt'] }],
  });
}

function aggregateCursorEntity(t: SchemaTypes): EntitySchema<AggregateCursor> {
  return new EntitySchema<AggregateCursor>({
    name: 'AggregateCursor',
    tableName: 'aggregate_cursor',
    columns: {
      consumerGroup: { name: 'consumer_group', type: 'varchar', length: 255, primary: true },
      aggregateType: { name: 'aggregate_type', type: 'varchar', length: 128, primary: true },
      aggregateId: { name: 'aggregate_id', type: 'varchar', length: 128, primary: true },
      lastVersion: { name: 'last_version', type: 'bigint', default: 0 },
      skippedVersions: { name: 'skipped_versions', type: 'bigint', default: 0 },
      updatedAt: {
        name: 'updated_at',
        type: t.timestamp,
        precision: 3,
        default: () => t.now,
      },
    },
  });
}

/** `consumed_event` and `aggregate_cursor` for one database (the same instances on every call). */
export const consumerEntitiesFor = perDatabase(
  (t) => [consumedEventEntity(t), aggregateCursorEntity(t)] as const,
);

/** The MySQL/MariaDB consumer entities (consumerEntitiesFor('postgres') for PostgreSQL). */
export const [ConsumedEventEntity, AggregateCursorEntity] = consumerEntitiesFor('mysql');
export const consumerEntities = [ConsumedEventEntity, AggregateCursorEntity];
