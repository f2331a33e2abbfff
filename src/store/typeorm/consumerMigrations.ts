import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';
import { migrationTypes } from './columnTypes';

/** Creates `consumed_event` (the consumer's dedupe table). */
export class CreateConsumedEvent1764633700000 implements MigrationInterface {
  name = 'CreateConsumedEvent1764633700000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const { timestamp: ts, now } = migrationTypes(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: 'consumed_event',
        columns: [
          { name: 'consumer_group', type: 'varchar', length: '255', isPrimary: true },
          { name: 'event_id', type: 'char', length: '36', isPrimary: true },
          { name: 'event_type', type: 'varchar', length: '128' },
          { name: 'aggregate_type', type: 'varchar', length: '128' },
          { name: 'aggregate_id', type: 'varchar', length: '128' },
          { name: 'aggregate_version', type: 'bigint' },
          { name: 'outcome', type: 'varchar', length: '16' },
          { name: 'consumed_at', type: ts, precision: 3, default: now },
        ],
        indices: [{ name: 'idx_consumed_event_consumed_at', columnNames: ['consumed_at'] }],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('consumed_event', true);
  }
}

/** Creates `aggregate_cursor` (the last applied aggregateVersion per consumer group and aggregate). */
export class CreateAggregateCursor1764633800000 implements MigrationInterface {
  name = 'CreateAggregateCursor1764633800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const { timestamp: ts, now } = migrationTypes(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: 'aggregate_cursor',
        columns: [
          { name: 'consumer_group', type: 'varchar', length: '255', isPrimary: true },
          { name: 'aggregate_type', type: 'varchar', length: '128', isPrimary: true },
          { name: 'aggregate_id', type: 'varchar', length: '128', isPrimary: true },
          { name: 'last_version', type: 'bigint', default: 0 },
          { name: 'skipped_versions', type: 'bigint', default: 0 },
          { name: 'updated_at', type: ts, precision: 3, default: now },
        ],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('aggregate_cursor', true);
  }
}

export const consumerMigrations = [CreateConsumedEvent1764633700000, CreateAggregateCursor1764633800000];
