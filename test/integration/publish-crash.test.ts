import type { DataSource } from 'typeorm';
import { TransactionalProducer, uuidv7 } from '../../src';
import { Collector } from '../helpers/collector';
import { childInWindow, type CrashMode } from '../helpers/crashWindow';
import { ensureSchema, openDataSource, orderExists, txRecord } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';

const TOPIC = 'rmqtx_tx_join_1';
const GROUP = 'it_publish_crash';
const RUNS = Number(process.env.CRASH_RUNS ?? 2);

/**
 * The crash windows of publish(manager, events) inside the caller's own transaction: a producer
 * process killed with SIGKILL in each window; another instance of the group answers the
 * broker's check-backs from tx_record.
 */
describe('crash windows of publish() in the caller transaction: SIGKILL, resolved by another instance', () => {
  let ds: DataSource;
  let collector: Collector;
  let survivor: TransactionalProducer;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    collector = await new Collector(TOPIC).start();
    // As in crash.test.ts: the killed children's channels take checks for a while; an in-doubt
    // half message discarded after the test broker's 5 checks is republished by discard recovery.
    survivor = makeProducer(ds, {
      topics: [TOPIC],
      producerGroup: GROUP,
      discardRecovery: { horizonMs: 15_000, intervalMs: 1000 },
    });
    await survivor.start();
  });

  afterAll(async () => {
    await survivor?.shutdown();
    await collector?.stop();
    await ds?.destroy();
  });

  async function flush(): Promise<void> {
    const { txId } = await ds.transaction((m) => survivor.publish(m, { topic: TOPIC, body: 'marker' }));
    await waitFor(() => collector.withProperty('TX_ID', txId).length > 0, {
      timeoutMs: 30_000,
      description: 'marker delivered',
    });
  }

  async function killAll(mode: CrashMode): Promise<Array<{ orderId: string; txId: string }>> {
    return Promise.all(
      Array.from({ length: RUNS }, async () => {
        const orderId = `${mode}-${uuidv7()}`;
        const child = await childInWindow(mode, TOPIC, GROUP, orderId);
        await child.kill();
        return { orderId, txId: child.txId };
      }),
    );
  }

  async function expectNeverDelivered(runs: Array<{ orderId: string; txId: string }>): Promise<void> {
    for (const { orderId, txId } of runs) {
      // The killed caller's transaction held the fence row; the database rolled it back with the
      // connection, and a check-back wrote the tombstone.
      await waitFor(async () => (await txRecord(ds, txId)) !== undefined, {
        timeoutMs: 40_000,
        description: `check-back decided ${txId}`,
      });
      expect(await txRecord(ds, txId)).toMatchObject({ status: 'ROLLED_BACK', resolved_by: 'CHECK_BACK' });
      expect(await orderExists(ds, orderId)).toBe(false);
    }
    await flush();
    for (const { txId } of runs) expect(collector.withProperty('TX_ID', txId)).toEqual([]);
  }

  it(`(1) killed after the half send, before the outbox rows: never delivered (${RUNS} runs)`, async () => {
    await expectNeverDelivered(await killAll('join-after-half'));
  });

  it(`(2) killed inside the caller's work after publish returned, before COMMIT: never delivered (${RUNS} runs)`, async () => {
    await expectNeverDelivered(await killAll('join-in-work'));
  });

  it(`(3) killed after the caller's COMMIT, before EndTransaction: delivered by check-back (${RUNS} runs)`, async () => {
    const runs = await killAll('join-after-commit');
    for (const { orderId, txId } of runs) {
      expect(await orderExists(ds, orderId)).toBe(true);
      expect(await txRecord(ds, txId)).toMatchObject({ status: 'COMMITTED', resolved_by: 'PRODUCER' });
      await waitFor(() => collector.withProperty('TX_ID', txId).length > 0, {
        timeoutMs: 40_000,
        description: `check-back delivered ${txId}`,
      });
    }
    await flush();
    // At least once, as in crash.test.ts: any copy is the same message with the same eventId.
    for (const { txId } of runs) {
      const copies = collector.withProperty('TX_ID', txId);
      expect(copies.length).toBeGreaterThanOrEqual(1);
      expect(new Set(copies.map((c) => `${c.messageId}/${c.properties.EVENT_ID}`)).size).toBe(1);
    }
  });
});
