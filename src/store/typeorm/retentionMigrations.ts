import { TableIndex, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * Retention reads tx_record by age: without this index its purge was a full scan whose
 * DELETE locked every row it read (REPEATABLE READ), i.e. the fence table (see docs/relay.md).
 */
export class AddTxRecordCreatedIndex1764634000000 implements MigrationInterface {
  name = 'AddTxRecordCreatedIndex1764634000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createIndex(
      'tx_record',
      new TableIndex({ name: 'idx_tx_record_created', columnNames: ['created_at'] }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropIndex('tx_record', 'idx_tx_record_created');
  }
}
