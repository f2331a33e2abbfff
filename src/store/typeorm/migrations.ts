import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';
import { migrationTypes } from './columnTypes';
import { consumerMigrations } from './consumerMigrations';
import { CreateOutboxEvent1764633900000 } from './outboxMigrations';
import { AddTxRecordCreatedIndex1764634000000 } from './retentionMigrations';

/** Creates `tx_record` (the fence). Built with TypeORM's Table API; the column types come from the database it runs on
 * (MySQL/MariaDB or PostgreSQL, see columnTypes.ts). */
export class CreateTxRecord1764633600000 implements MigrationInterface {
  name = 'CreateTxRecord1764633600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const { timestamp: ts, now } = migrationTypes(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: 'tx_record',
        columns: [
          { name: 'tx_id', type: 'char', length: '36', isPrimary: true },
          { name: 'status', type: 'varchar', length: '16' },
          { name: 'resolved_by', type: 'varchar', length: '16' },
          { name: 'producer_group', type: 'varchar', length: '255' },
          { name: 'topic', type: 'varchar', length: '255', isNullable: true },
          { name: 'event_count', type: 'int', default: 0 },
          { name: 'created_at', type: ts, precision: 3, default: now },
          { name: 'confirmed_at', type: ts, precision: 3, isNullable: true },
        ],
        indices: [
          { name: 'idx_tx_record_status_confirmed', columnNames: ['status', 'confirmed_at', 'created_at'] },
        ],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('tx_record', true);
  }
}

/** Add these to your DataSource's `migrations` (or run them with `dataSource.runMigrations()`). */
export const rocketMqTxMigrations = [
  CreateTxRecord1764633600000,
  ...consumerMigrations,
  CreateOutboxEvent1764633900000,
  AddTxRecordCreatedIndex1764634000000,
];
