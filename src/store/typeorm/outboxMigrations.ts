import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';
import { migrationTypes } from './columnTypes';

/**
 * Creates `outbox_event`. (status, next_attempt_at, event_id) keeps every relay scan a range
 * read; the UNIQUE aggregate key only binds rows that set all three (NULLs never collide).
 */
export class CreateOutboxEvent1764633900000 implements MigrationInterface {
  name = 'CreateOutboxEvent1764633900000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const { timestamp: ts, blob } = migrationTypes(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: 'outbox_event',
        columns: [
          { name: 'event_id', type: 'char', length: '36', isPrimary: true },
          { name: 'tx_id', type: 'char', length: '36' },
          { name: 'topic', type: 'varchar', length: '255' },
          { name: 'tag', type: 'varchar', length: '128', isNullable: true },
          { name: 'keys', type: 'text' },
          { name: 'properties', type: 'text' },
          { name: 'aggregate_type', type: 'varchar', length: '255', isNullable: true },
          { name: 'aggregate_id', type: 'varchar', length: '255', isNullable: true },
          { name: 'aggregate_version', type: 'bigint', isNullable: true },
          { name: 'event_type', type: 'varchar', length: '255', isNullable: true },
          { name: 'event_version', type: 'int', isNullable: true },
          { name: 'payload', type: blob },
          { name: 'occurred_at', type: ts, precision: 3 },
          { name: 'trace_id', type: 'varchar', length: '64', isNullable: true },
          { name: 'status', type: 'varchar', length: '16' },
          { name: 'attempts', type: 'int', default: 0 },
          { name: 'next_attempt_at', type: ts, precision: 3 },
          { name: 'lease_until', type: ts, precision: 3, isNullable: true },
          { name: 'lease_owner', type: 'varchar', length: '64', isNullable: true },
          { name: 'published_at', type: ts, precision: 3, isNullable: true },
          { name: 'last_error', type: 'text', isNullable: true },
        ],
        indices: [
          { name: 'idx_outbox_status_next', columnNames: ['status', 'next_attempt_at', 'event_id'] },
          { name: 'idx_outbox_tx', columnNames: ['tx_id'] },
          {
            name: 'uq_outbox_aggregate_version',
            columnNames: ['aggregate_type', 'aggregate_id', 'aggregate_version'],
            isUnique: true,
          },
        ],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('outbox_event', true);
  }
}
