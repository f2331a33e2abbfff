/** The event contract between the order service and the inventory service. */
import { defineEvent } from '../../src'; // 'rocketmq-tx'

export interface OrderPlacedData {
  orderId: string;
  customer: string;
  sku: string;
  qty: number;
  /** How the order service delivered the event: a transactional message or the outbox relay. */
  channel: 'checkout' | 'import';
}

export const OrderPlaced = defineEvent<OrderPlacedData>({
  eventType: 'OrderPlaced',
  eventVersion: 1,
  aggregateType: 'Order',
  validate: (d) => {
    const data = d as Partial<OrderPlacedData> | null;
    if (typeof data?.orderId !== 'string' || typeof data.sku !== 'string') {
      return 'orderId and sku must be strings';
    }
    if (!Number.isInteger(data.qty) || (data.qty as number) < 1) return 'qty must be a positive integer';
    return undefined;
  },
});
