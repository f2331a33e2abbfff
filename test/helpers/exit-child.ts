/**
 * A process that builds one SDK component and ends its script without exiting explicitly: it
 * must exit on its own (nothing of the SDK may keep the event loop alive). Used by
 * test/integration/process-exit.test.ts.
 *   node -r ts-node/register/transpile-only test/helpers/exit-child.ts COMPONENT MODE
 * COMPONENT: producer | relay | consumer
 * MODE: never (constructed only) | shutdown (shutdown without start) | start-no-db (start fails:
 * the DataSource is not initialized) | start-no-broker (start fails: nothing listens at the endpoint)
 */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { IdempotentConsumer, OutboxRelay, TransactionalProducer } from '../../src';
import { openDataSource } from './db';

const [component, mode] = process.argv.slice(2);

async function main(): Promise<void> {
  const dataSource =
    mode === 'start-no-broker' ? await openDataSource({ poolSize: 1 }) : new DataSource({ type: 'mysql' });
  // Port 1 on the loopback: refused at once.
  const common = { endpoints: '127.0.0.1:1', dataSource, startTimeoutMs: 2000, shutdownTimeoutMs: 2000 };
  const built =
    component === 'producer'
      ? new TransactionalProducer({ ...common, producerGroup: 'exit_child', topics: ['rmqtx_tx_1'] })
      : component === 'relay'
        ? new OutboxRelay({ ...common, topics: ['rmqtx_tx_1'] })
        : new IdempotentConsumer({
            ...common,
            consumerGroup: 'exit_child',
            subscriptions: ['rmqtx_normal_1'],
            handlers: [{ eventType: 'E', eventVersion: 1, handle: async () => undefined }],
          });
  if (mode === 'start-no-db' || mode === 'start-no-broker') {
    const err = await built.start().then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
    console.log(`start failed: ${err?.code ?? 'it did not fail'}`);
  }
  if (mode !== 'never') await built.shutdown();
  if (dataSource.isInitialized) await dataSource.destroy();
  console.log('script done');
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
