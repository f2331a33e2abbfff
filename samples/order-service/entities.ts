/** TypeORM entities of the sample: the order service's orders, the inventory service's stock. */
import { Column, Entity, PrimaryColumn } from 'typeorm';

/** An order, written by the order service in the same transaction as its tx_record and event. */
@Entity({ name: 'shop_order' })
export class ShopOrder {
  @PrimaryColumn({ type: 'varchar', length: 64 })
  id!: string;

  @Column({ type: 'varchar', length: 64 })
  customer!: string;

  @Column({ type: 'varchar', length: 64 })
  sku!: string;

  @Column({ type: 'int' })
  qty!: number;

  /** 'checkout' (transactional message) or 'import' (outbox relay). */
  @Column({ type: 'varchar', length: 16 })
  channel!: string;

  @Column({ name: 'tx_id', type: 'varchar', length: 36 })
  txId!: string;

  @Column({ name: 'created_at', type: Date, precision: 3, default: () => 'CURRENT_TIMESTAMP(3)' })
  createdAt!: Date;
}

/** Stock of one SKU, owned by the inventory service. */
@Entity({ name: 'inventory_stock' })
export class Stock {
  @PrimaryColumn({ type: 'varchar', length: 64 })
  sku!: string;

  @Column({ type: 'int' })
  available!: number;

  @Column({ type: 'int', default: 0 })
  reserved!: number;
}

/** One reservation per order: the inventory consumer's effect of an OrderPlaced event. */
@Entity({ name: 'inventory_reservation' })
export class Reservation {
  @PrimaryColumn({ name: 'order_id', type: 'varchar', length: 64 })
  orderId!: string;

  @Column({ type: 'varchar', length: 64 })
  sku!: string;

  @Column({ type: 'int' })
  qty!: number;

  /** 'RESERVED', or 'OUT_OF_STOCK' when the stock was short (recorded, not retried). */
  @Column({ type: 'varchar', length: 16 })
  status!: string;

  @Column({ name: 'event_id', type: 'varchar', length: 36, unique: true })
  eventId!: string;

  @Column({ name: 'reserved_at', type: Date, precision: 3, default: () => 'CURRENT_TIMESTAMP(3)' })
  reservedAt!: Date;
}

export const orderServiceEntities = [ShopOrder, Stock, Reservation];
