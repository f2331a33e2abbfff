import { EntitySchema } from 'typeorm';
import { perDatabase, type SchemaDatabase, type SchemaTypes } from './columnTypes';
import { consumerEntitiesFor } from './consumerEntities';
import { outboxEventEntityFor } from './outboxEntities';

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

function txRecordEntity(t: SchemaTypes): EntitySchema<TxRecord> {
  return new EntitySchema<TxRecord>({
    name: 'TxRecord',
    tableName: 'tx_record',
    columns: {
      txId: { name: 'tx_id', type: 'char', length: 36, primary: true },
      status: { type: 'varchar', length: 16 },
      resolvedBy: { name: 'resolved_by', type: 'varchar', length: 16 },
      producerGroup: { name: 'producer_group', type: 'varchar', length: 255 },
      topic: { type: 'varchar', length: 255, nullable: true },
      eventCount: { name: 'event_count', type: 'int', default: 0 },
      createdAt: { name: 'created_at', type: t.timestamp, precision: 3, default: () => t.now },
      confirmedAt: { name: 'confirmed_at', type: t.timestamp, precision: 3, nullable: true },
    },
    indices: [
      { name: 'idx_tx_record_status_confirmed', columns: ['status', 'confirmedAt', 'createdAt'] },
      { name: 'idx_tx_record_created', columns: ['createdAt'] },
    ],
  });
}

/** The `tx_record` entity for one database (the same instance on every call). */
export const txRecordEntityFor = perDatabase(txRecordEntity);

/** The MySQL/MariaDB `tx_record` entity (see rocketMqTxEntitiesFor for PostgreSQL). */
export const TxRecordEntity = txRecordEntityFor('mysql');

/**
 * The SDK's entities for one database: add them to your DataSource's `entities`, with the
 * DataSource's own `type` (`'mysql'`, `'mariadb'` or `'postgres'`). Their column types match what
 * rocketMqTxMigrations creates on that database, so `synchronize` finds nothing to change.
 */
export function rocketMqTxEntitiesFor(database: SchemaDatabase): EntitySchema<unknown>[] {
  return [
    txRecordEntityFor(database),
    ...consumerEntitiesFor(database),
    outboxEventEntityFor(database),
  ] as EntitySchema<unknown>[];
}

/** The MySQL/MariaDB entities (`rocketMqTxEntitiesFor('mysql')`); on PostgreSQL use rocketMqTxEntitiesFor('postgres'). */
export const rocketMqTxEntities = rocketMqTxEntitiesFor('mysql');
