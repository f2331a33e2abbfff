/** Shared by the relay phase and the relay sweep: NEW outbox rows to drain, and a raw producer. */
import { Producer } from 'rocketmq-client-nodejs';
import type { DataSource } from 'typeorm';
import { TransactionalProducer, defineEvent } from '../../src';
import { startClient } from '../../src/broker/startup';
import { ENDPOINTS, GROUPS, quietLogger } from './env';

export const BenchEvent = defineEvent<{ key: string }>({
  eventType: 'BenchEvent',
  eventVersion: 1,
  aggregateType: 'BenchAggregate',
});

/**
 * `count` NEW outbox rows on `topic` with `tag`, written by transact in outbox delivery (16 at a
 * time); resolves with their keys (`<keyPrefix><i>`).
 */
export async function writeNewOutboxRows(
  ds: DataSource,
  topic: string,
  tag: string,
  keyPrefix: string,
  count: number,
): Promise<string[]> {
  const producer = new TransactionalProducer({
    endpoints: ENDPOINTS,
    dataSource: ds,
    producerGroup: GROUPS.relay,
    topics: [topic],
    delivery: 'outbox',
    startTimeoutMs: 30_000,
    logger: quietLogger,
  });
  await producer.start();
  const written: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < count) {
        const key = `${keyPrefix}${next++}`;
        await producer.transact(
          {
            topic,
            tag,
            keys: [key],
            event: BenchEvent.create({ aggregateId: key, aggregateVersion: 1, data: { key } }),
          },
          async () => undefined,
        );
        written.push(key);
      }
    }),
  );
  await producer.shutdown();
  return written;
}

/** A started raw rocketmq-client-nodejs producer of normal messages on `topic`. */
export async function startRawProducer(topic: string): Promise<Producer> {
  const raw = new Producer({
    endpoints: ENDPOINTS,
    namespace: '',
    topics: [topic],
    requestTimeout: 3000,
    logger: quietLogger,
  });
  await startClient(raw, 30_000, {
    what: 'producer',
    endpoints: ENDPOINTS,
    resource: 'bench topics',
    accessKey: undefined,
  });
  return raw;
}
