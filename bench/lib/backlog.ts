/** A backlog of events for consumer benches: published by an OutboxRelay while the groups wait. */
import type { DataSource } from 'typeorm';
import { OutboxRelay, type IdempotentConsumer } from '../../src';
import { ENDPOINTS, quietLogger, sleep } from './env';
import { writeNewOutboxRows } from './outboxRows';

export async function until(cond: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond() && Date.now() < deadline) await sleep(10);
  if (!cond()) throw new Error(`timed out after ${timeoutMs} ms`);
}

/**
 * Starts and stops a consumer of the group once, so the group exists before anything is
 * published (a new group does not start at the oldest message).
 */
export async function registerGroup(consumer: IdempotentConsumer): Promise<void> {
  await consumer.start();
  await sleep(3000);
  await consumer.shutdown();
}

/**
 * `events` NEW outbox rows on `topic` with `tag`, delivered by an OutboxRelay over `transport`;
 * resolves with their keys once the relay sent them all.
 */
export async function relayBacklog(
  ds: DataSource,
  topic: string,
  tag: string,
  events: number,
  transport: 'official' | 'lean',
): Promise<string[]> {
  const keys = await writeNewOutboxRows(ds, topic, tag, `${tag}-`, events);
  const relay = new OutboxRelay({
    endpoints: ENDPOINTS,
    dataSource: ds,
    topics: [topic],
    batchSize: 100,
    pollIntervalMs: 20,
    reconcileDiscarded: false,
    startTimeoutMs: 30_000,
    transport,
    logger: quietLogger,
  });
  await relay.start();
  await until(() => relay.stats.sent >= events, 300_000);
  await relay.shutdown();
  return keys;
}
