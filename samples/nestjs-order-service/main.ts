/**
 * Runs the NestJS order service: `npx ts-node samples/nestjs-order-service/main.ts`, then
 * `curl -XPOST -H 'content-type: application/json' -d '{"sku":"A","qty":2}' 127.0.0.1:3000/orders`.
 * Env: ROCKETMQ_ENDPOINTS (127.0.0.1:8081), ROCKETMQ_TX_DB_URL (mysql://root@127.0.0.1:3306/test), PORT.
 */
import { createOrderService } from './app';

async function main(): Promise<void> {
  const app = await createOrderService({
    endpoints: process.env.ROCKETMQ_ENDPOINTS ?? '127.0.0.1:8081',
    dbUrl: process.env.ROCKETMQ_TX_DB_URL ?? 'mysql://root@127.0.0.1:3306/test',
    topic: process.env.ORDER_TOPIC ?? 'orders_tx',
    producerGroup: 'nest_order_service',
    consumerGroup: 'nest_order_fulfilment',
  });
  await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1');
  console.log(`order service on ${await app.getUrl()}`);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
