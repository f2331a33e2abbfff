/**
 * A CheckBackResolver that derives the outcome from the order table, for half messages that were
 * not sent by rocketmq-tx (no TX_ID property): e.g. legacy code that sends a half message with the
 * order id as its first key, then inserts the order into `shop_order` (samples/order-service) in
 * its own transaction. It answers UNKNOWN whenever it cannot be sure.
 */
import type { DataSource } from 'typeorm';
import { TransactionResolution, type CheckBackMessage, type CheckBackResolver } from '../src'; // 'rocketmq-tx'
import { ShopOrder } from './order-service/entities';

export class OrderTableResolver implements CheckBackResolver {
  constructor(private readonly dataSource: DataSource) {}

  async resolve(message: CheckBackMessage): Promise<TransactionResolution> {
    const orderId = message.keys[0];
    if (!orderId) return TransactionResolution.UNKNOWN;
    try {
      // A committed order is visible; an uncommitted one is not (REPEATABLE READ, plain read).
      const found = await this.dataSource.getRepository(ShopOrder).existsBy({ id: orderId });
      // Not visible: the legacy writer may still be inside its transaction (or rolled back).
      // A plain read cannot tell the two apart, so never ROLLBACK here: ask again later. After
      // transactionCheckMax unanswered checks the broker discards the half message — the
      // rolled-back case. (Messages sent by `transact` need none of this: the tx_record fence
      // decides them by writing.)
      return found ? TransactionResolution.COMMIT : TransactionResolution.UNKNOWN;
    } catch {
      // Never ROLLBACK because a lookup failed.
      return TransactionResolution.UNKNOWN;
    }
  }
}

// Wiring: new TransactionalProducer({ ..., checkBack: { resolver: new OrderTableResolver(dataSource) } })
