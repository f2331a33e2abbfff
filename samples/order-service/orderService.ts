/**
 * The order service: saves an order and publishes OrderPlaced in one local transaction.
 * Checkout orders go out as transactional messages (half message, tx_record fence, check-back);
 * imported orders as outbox rows that the OutboxRelay delivers (the local-message-table entry).
 */
import type { EntityManager } from 'typeorm';
import { TransactionFencedError, type TransactionalProducer } from '../../src'; // 'rocketmq-tx'
import { OrderPlaced, type OrderPlacedData } from './contract';
import { ShopOrder } from './entities';

/** Units a customer may have on order at once; checked inside the transaction. */
export const CREDIT_LIMIT_UNITS = 20;

export interface PlaceOrder {
  id: string;
  customer: string;
  sku: string;
  qty: number;
  channel: OrderPlacedData['channel'];
}

export interface PlacedOrder {
  orderId: string;
  txId: string;
  eventId: string;
  /** 1, or more when a TransactionFencedError was retried. */
  attempts: number;
}

const MAX_ATTEMPTS = 3;

/** A business rule refused the order after it was written: the local transaction rolls back. */
export class OrderRejectedError extends Error {
  constructor(
    message: string,
    readonly orderId: string,
    readonly txId: string,
    readonly eventId: string,
  ) {
    super(message);
    this.name = 'OrderRejectedError';
  }
}

export interface OrderServiceOptions {
  /** TRANSACTION topic for checkout orders. */
  txTopic: string;
  /** NORMAL topic for imported orders (delivered by the relay). */
  eventsTopic: string;
  /** Tag on every event (consumers filter on it). */
  tag: string;
}

export class OrderService {
  constructor(
    /** The real producer, or rocketmq-tx/testing's InMemoryProducer in unit tests. */
    private readonly producer: Pick<TransactionalProducer, 'transact'>,
    private readonly options: OrderServiceOptions,
  ) {}

  async placeOrder(order: PlaceOrder): Promise<PlacedOrder> {
    const checkout = order.channel === 'checkout';
    const event = OrderPlaced.create({
      aggregateId: order.id,
      aggregateVersion: 1,
      data: {
        orderId: order.id,
        customer: order.customer,
        sku: order.sku,
        qty: order.qty,
        channel: order.channel,
      },
    });
    // The same event (same eventId) on every attempt: a fenced attempt wrote and sent nothing.
    for (let attempt = 1; ; attempt++) {
      try {
        const { txId } = await this.producer.transact(
          { topic: checkout ? this.options.txTopic : this.options.eventsTopic, tag: this.options.tag, event },
          async (manager, { txId }) => {
            await manager.insert(ShopOrder, { ...order, txId });
            await checkCredit(manager, order, txId, event.eventId);
          },
          { delivery: checkout ? 'transactional' : 'outbox' },
        );
        return { orderId: order.id, txId, eventId: event.eventId, attempts: attempt };
      } catch (err) {
        // A check-back rolled the transaction back before it started (the machine was slow): retry.
        if (err instanceof TransactionFencedError && attempt < MAX_ATTEMPTS) continue;
        throw err;
      }
    }
  }
}

/** Reads the order just written (same transaction) with the customer's others; throws past the limit. */
async function checkCredit(manager: EntityManager, order: PlaceOrder, txId: string, eventId: string) {
  const units = Number((await manager.sum(ShopOrder, 'qty', { customer: order.customer })) ?? 0);
  if (units > CREDIT_LIMIT_UNITS) {
    throw new OrderRejectedError(
      `credit limit: customer ${order.customer} would have ${units} units on order (limit ${CREDIT_LIMIT_UNITS})`,
      order.id,
      txId,
      eventId,
    );
  }
}
