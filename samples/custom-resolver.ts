/**
 * A CheckBackResolver for half messages that were not sent by rocketmq-tx (no TX_ID property),
 * e.g. by legacy code that sends a half message and then writes `legacy_order`. It derives the
 * outcome from the order table and answers UNKNOWN whenever it cannot be sure.
 */
import type { DataSource } from 'typeorm';
import { TransactionResolution, type CheckBackMessage, type CheckBackResolver } from '../src'; // 'rocketmq-tx'

export class LegacyOrderResolver implements CheckBackResolver {
  constructor(private readonly dataSource: DataSource) {}

  async resolve(message: CheckBackMessage): Promise<TransactionResolution> {
    const orderId = message.keys[0];
    if (!orderId) return TransactionResolution.UNKNOWN;
    try {
      const rows: Array<{ status: string }> = await this.dataSource.query(
        'SELECT status FROM legacy_order WHERE id = ?',
        [orderId],
      );
      // Not visible (yet): the legacy writer may still be inside its transaction. Ask again later.
      if (rows.length === 0) return TransactionResolution.UNKNOWN;
      return rows[0]!.status === 'CANCELLED' ? TransactionResolution.ROLLBACK : TransactionResolution.COMMIT;
    } catch {
      // Never ROLLBACK because a lookup failed.
      return TransactionResolution.UNKNOWN;
    }
  }
}

// Wiring: new TransactionalProducer({ ..., checkBack: { resolver: new LegacyOrderResolver(dataSource) } })
