/** The sample's own migration, next to the SDK's (built with TypeORM's Table API, like the SDK's). */
import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';

export class CreateOrderServiceTables1764720000000 implements MigrationInterface {
  name = 'CreateOrderServiceTables1764720000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const now = 'CURRENT_TIMESTAMP(3)';
    // TypeORM maps the entities' Date columns to datetime (MySQL/MariaDB) and timestamp (PostgreSQL).
    const ts = queryRunner.connection.options.type === 'postgres' ? 'timestamp' : 'datetime';
    await queryRunner.createTable(
      new Table({
        name: 'shop_order',
        columns: [
          { name: 'id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'customer', type: 'varchar', length: '64' },
          { name: 'sku', type: 'varchar', length: '64' },
          { name: 'qty', type: 'int' },
          { name: 'channel', type: 'varchar', length: '16' },
          { name: 'tx_id', type: 'char', length: '36' },
          { name: 'created_at', type: ts, precision: 3, default: now },
        ],
        indices: [
          { name: 'idx_shop_order_tx', columnNames: ['tx_id'] },
          { name: 'idx_shop_order_customer', columnNames: ['customer'] },
        ],
      }),
      true,
    );
    await queryRunner.createTable(
      new Table({
        name: 'inventory_stock',
        columns: [
          { name: 'sku', type: 'varchar', length: '64', isPrimary: true },
          { name: 'available', type: 'int' },
          { name: 'reserved', type: 'int', default: 0 },
        ],
      }),
      true,
    );
    await queryRunner.createTable(
      new Table({
        name: 'inventory_reservation',
        columns: [
          { name: 'order_id', type: 'varchar', length: '64', isPrimary: true },
          { name: 'sku', type: 'varchar', length: '64' },
          { name: 'qty', type: 'int' },
          { name: 'status', type: 'varchar', length: '16' },
          { name: 'event_id', type: 'char', length: '36', isUnique: true },
          { name: 'reserved_at', type: ts, precision: 3, default: now },
        ],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('inventory_reservation', true);
    await queryRunner.dropTable('inventory_stock', true);
    await queryRunner.dropTable('shop_order', true);
  }
}

export const orderServiceMigrations = [CreateOrderServiceTables1764720000000];
