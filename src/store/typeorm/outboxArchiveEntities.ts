import { EntitySchema } from 'typeorm';
import { OutboxEventEntity, type OutboxEvent } from './outboxEntities';

/** A row of the opt-in `outbox_event_archive`: a SENT outbox row moved by Retention.archive(). */
export interface ArchivedOutboxEvent extends OutboxEvent {
  archivedAt: Date;
}

/** Not in rocketMqTxEntities (the table is opt-in); add it with CreateOutboxEventArchive. */
export const OutboxEventArchiveEntity = new EntitySchema<ArchivedOutboxEvent>({
  name: 'OutboxEventArchive',
  tableName: 'outbox_event_archive',
  columns: {
    ...OutboxEventEntity.options.columns,
    archivedAt: { name: 'archived_at', type: 'datetime', precision: 3 },
  } as EntitySchema<ArchivedOutboxEvent>['options']['columns'],
  indices: [
    { name: 'idx_outbox_archive_aggregate', columns: ['aggregateType', 'aggregateId', 'aggregateVersion'] },
    { name: 'idx_outbox_archive_tx', columns: ['txId'] },
    { name: 'idx_outbox_archive_published', columns: ['publishedAt'] },
  ],
});
