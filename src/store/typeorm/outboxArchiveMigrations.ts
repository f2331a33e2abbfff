import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';
import { migrationTypes } from './columnTypes';

/**
 * The columns Retention.archive() copies from outbox_event to outbox_event_archive (every
 * column of outbox_event; the archive adds archived_at).
 */
export const ARCHIVED_OUTBOX_COLUMNS = [
  'event_id',
  'tx_id',
  'topic',
  'tag',
  'keys',
  'properties',
  'aggregate_type',
  'aggregate_id',
  'aggregate_version',
  'event_type',
  'event_version',
  'payload',
  'occurred_at',
  'trace_id',
  'status',
  'attempts',
  'next_attempt_at',
  'lease_until',
  'lease_owner',
  'published_at',
  'last_error',
] as const;

/**
 * Opt-in (not in rocketMqTxMigrations): creates `outbox_event_archive` for Retention.archive().
 * The same columns as outbox_event plus archived_at; the aggregate index is not UNIQUE (an
 * archive must take every row it is given) and serves the FactReconciler's lookups.
 */
export class CreateOutboxEventArchive1764634100000 implements MigrationInterface {
  name = 'CreateOutboxEventArchive1764634100000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const { timestamp: ts, blob } = migrationTypes(queryRunner);
    await queryRunner.createTable(
      new Table({
        name: 'outbox_event_archive',
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
          { name: 'archived_at', type: ts, precision: 3 },
        ],
        indices: [
          {
            name: 'idx_outbox_archive_aggregate',
            columnNames: ['aggregate_type', 'aggregate_id', 'aggregate_version'],
          },
          { name: 'idx_outbox_archive_tx', columnNames: ['tx_id'] },
          { name: 'idx_outbox_archive_published', columnNames: ['published_at'] },
        ],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('outbox_event_archive', true);
  }
}

/** Add to your migrations to use Retention.archive(). */
export const rocketMqTxArchiveMigrations = [CreateOutboxEventArchive1764634100000];
