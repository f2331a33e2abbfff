import { EntitySchema } from 'typeorm';
import { consumerEntities } from './consumerEntities';
import { OutboxEventEntity } from './outboxEntities';

/** A row of `tx_record`, the check-back fence. Timestamps come from the database clock. */
export interface TxRecord {
  txId: string;
  status: 'COMMITTED' | 'ROLLED_BACK';
  resolvedBy: 'PRODUCER' | 'CHECK_BACK';
  producerGroup: string;
  topic: string | null;
  eventCount: number;
  createdAt: Date;
  confirmedAt: Date | null;
}

export const TxRecordEntity = new EntitySchema<TxRecord>({
  name: 'TxRecord',
  tableName: 'tx_record',
  columns: {
    txId: { name: 'tx_id', type: 'char', length: 36, primary: true },
    status: { type: 'varchar', length: 16 },
    resolvedBy: { name: 'resolved_by', type: 'varchar', length: 16 },
    producerGroup: { name: 'producer_group', type: 'varchar', length: 255 },
    topic: { type: 'varchar', length: 255, nullable: true },
    eventCount: { name: 'event_count', type: 'int', default: 0 },
    createdAt: { name: 'created_at', type: 'datetime', precision: 3, default: () => 'CURRENT_TIMESTAMP(3)' },
    confirmedAt: { name: 'confirmed_at', type: 'datetime', precision: 3, nullable: true },
  },
  indices: [
    { name: 'idx_tx_record_status_confirmed', columns: ['status', 'confirmedAt', 'createdAt'] },
    { name: 'idx_tx_record_created', columns: ['createdAt'] },
  ],
});

/** Add these to your DataSource's `entities`. */
export const rocketMqTxEntities = [TxRecordEntity, ...consumerEntities, OutboxEventEntity];
