import { EntitySchema } from 'typeorm';
import { perDatabase, type SchemaTypes } from './columnTypes';
import { outboxEventColumns, type OutboxEvent } from './outboxEntities';

/** A row of the opt-in `outbox_event_archive`: a SENT outbox row moved by Retention.archive(). */
export interface ArchivedOutboxEvent extends OutboxEvent {
  archivedAt: Date;
}

function outboxEventArchiveEntity(t: SchemaTypes): EntitySchema<ArchivedOutboxEvent> {
  return new EntitySchema<ArchivedOutboxEvent>({
    name: 'OutboxEventArchive',
    tableName: 'outbox_event_archive',
    columns: {
      ...outboxEventColumns(t),
      archivedAt: { name: 'archived_at', type: t.timestamp, precision: 3 },
    } as EntitySchema<ArchivedOutboxEvent>['options']['columns'],
    indices: [
      { name: 'idx_outbox_archive_aggregate', columns: ['aggregateType', 'aggregateId', 'aggregateVersion'] },
      { name: 'idx_outbox_archive_tx', columns: ['txId'] },
      { name: 'idx_outbox_archive_published', columns: ['publishedAt'] },
    ],
  });
}

/** The opt-in `outbox_event_archive` entity for one database (the same instance on every call). */
export const outboxEventArchiveEntityFor = perDatabase(outboxEventArchiveEntity);

/**
 * The MySQL/MariaDB archive entity (outboxEventArchiveEntityFor('postgres') for PostgreSQL). Not
 * in rocketMqTxEntities (the table is opt-in); add it with CreateOutboxEventArchive.
 */
export const OutboxEventArchiveEntity = outboxEventArchiveEntityFor('mysql');
