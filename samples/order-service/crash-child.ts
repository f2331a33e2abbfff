/**
 * A second instance of the order service that dies in the middle of a transaction.
 *
 * argv: txTopic eventsTopic producerGroup tag; environment ROCKETMQ_ENDPOINTS, ROCKETMQ_TX_DB_URL.
 * It starts its producer and prints {"state":"ready"}; then reads one order (a JSON line on
 * stdin), places it, and right after the local COMMIT — order row and tx_record durable, before
 * EndTransaction(COMMIT) reaches the broker — prints {"state":"in-window",...} and freezes its
 * thread (no check-back answered, no heartbeat) until the parent SIGKILLs it.
 */
import * as fs from 'node:fs';
import * as readline from 'node:readline';
import { EventSubscriber, type EntitySubscriberInterface, type TransactionCommitEvent } from 'typeorm';
import { TransactionalProducer, TransactionResolution } from '../../src'; // 'rocketmq-tx'
import { createDataSource, DEFAULT_DB_URL } from './database';
import { OrderService, type PlaceOrder } from './orderService';
import { ShopOrder } from './entities';

let inWindow: ((event: TransactionCommitEvent) => Promise<void>) | undefined;

/** TypeORM awaits this after COMMIT, before transact() can send EndTransaction. */
@EventSubscriber()
class DieAfterCommit implements EntitySubscriberInterface {
  async afterTransactionCommit(event: TransactionCommitEvent): Promise<void> {
    await inWindow?.(event);
  }
}

function say(message: Record<string, unknown>): void {
  fs.writeSync(1, `${JSON.stringify(message)}\n`); // synchronous: on stdout before the freeze
}

async function main(): Promise<void> {
  const [txTopic, eventsTopic, producerGroup, tag] = process.argv.slice(2) as [
    string,
    string,
    string,
    string,
  ];
  const dataSource = createDataSource(process.env.ROCKETMQ_TX_DB_URL ?? DEFAULT_DB_URL, {
    poolSize: 2,
    subscribers: [DieAfterCommit],
  });
  await dataSource.initialize();
  const producer = new TransactionalProducer({
    endpoints: process.env.ROCKETMQ_ENDPOINTS ?? '127.0.0.1:8081',
    dataSource,
    producerGroup,
    topics: [txTopic],
    startTimeoutMs: 30_000,
    // This instance is about to die: it answers no check-back (UNKNOWN sends no reply), so even a
    // check-back that reaches it before the kill is left to the surviving instance.
    checkBack: { resolver: { resolve: async () => TransactionResolution.UNKNOWN }, resolverScope: 'all' },
  });
  await producer.start();
  const service = new OrderService(producer, { txTopic, eventsTopic, tag });
  const lines = readline.createInterface({ input: process.stdin });
  lines.on('close', () => process.exit(0)); // the parent went away
  say({ state: 'ready', pid: process.pid });
  const line = await new Promise<string>((resolve) => lines.once('line', resolve));
  const order = JSON.parse(line) as PlaceOrder;
  inWindow = async (event) => {
    // Committed: the order and its tx_record are in the database (read back, autocommit).
    const row = await event.manager.findOneBy(ShopOrder, { id: order.id });
    say({ state: 'in-window', orderId: order.id, txId: row?.txId });
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); // frozen, as if dead
  };
  await service.placeOrder(order);
}

main().catch((err: unknown) => {
  process.stderr.write(`crash-child failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(3);
});
