/**
 * An IdempotentConsumer process to be killed with SIGKILL between the DB commit and the ack.
 * argv: topic, consumerGroup. Prints {"window":"after-commit","eventId":...} when the first
 * message has committed and its ack is about to be sent, then hangs instead of acking.
 */
import { IdempotentConsumer } from '../../src';
import { RocketMqConsumerGateway } from '../../src/broker/RocketMqConsumerGateway';
import { withAck } from '../../src/broker/consumerGateway';
import { openDataSource, sql } from './db';
import { ENDPOINTS } from './env';

async function main(): Promise<void> {
  const [topic, group] = process.argv.slice(2) as [string, string];
  const ds = await openDataSource({ poolSize: 2 });
  const consumer = new IdempotentConsumer(
    {
      endpoints: ENDPOINTS,
      dataSource: ds,
      consumerGroup: group,
      subscriptions: [{ topic, tag: group }],
      handlers: [
        {
          eventType: 'ItemAdded',
          eventVersion: 1,
          handle: async (event, { manager }) => {
            await manager.query(
              sql(
                'INSERT INTO test_consumer_effect (consumer_group, aggregate_id, aggregate_version, event_id) VALUES (?, ?, ?, ?)',
              ),
              [group, event.aggregateId, event.aggregateVersion, event.eventId],
            );
          },
        },
      ],
      invisibleDurationMs: 10_000,
      startTimeoutMs: 30_000,
    },
    {
      gateway: (config, logger) =>
        withAck(new RocketMqConsumerGateway(config, logger), async (m) => {
          const body = JSON.parse(m.body.toString('utf8')) as { eventId: string };
          process.stdout.write(`${JSON.stringify({ window: 'after-commit', eventId: body.eventId })}\n`);
          await new Promise<never>(() => undefined);
        }),
    },
  );
  await consumer.start();
  process.stdout.write(`${JSON.stringify({ window: 'started' })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`consumer-child failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(3);
});
