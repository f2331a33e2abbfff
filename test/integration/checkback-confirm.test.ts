/**
 * The "COMMIT answered -> confirm" step against the real broker: an event whose EndTransaction
 * was lost is confirmed (outbox row SENT, so discard recovery never republishes it) only once the
 * check-back's COMMIT answer reached the proxy — the gateway's hook after the client's
 * EndTransaction(SOURCE_SERVER_CHECK) returned OK, not when the fence decided.
 */
import type { DataSource } from 'typeorm';
import type { TransactionalProducer } from '../../src';
import { Collector } from '../helpers/collector';
import { ensureSchema, openDataSource } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';
import { outboxRow } from '../helpers/relay';

const TOPIC = 'rmqtx_tx_confirm_0';
const GROUP = 'it_checkback_confirm';

describe('a check-back COMMIT confirms the event once the answer reached the proxy (real broker)', () => {
  let ds: DataSource;
  let collector: Collector;
  let producer: TransactionalProducer;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    collector = await new Collector(TOPIC).start();
    producer = makeProducer(
      ds,
      // The check-back (built-in fence) is the only way these events get confirmed.
      { topics: [TOPIC], producerGroup: GROUP, discardRecovery: { horizonMs: 600_000 } },
      {
        // Rejected, not skipped: as a lost EndTransaction, the commit is ambiguous, nothing confirmed.
        beforeEnd: async () => {
          throw new Error('EndTransaction dropped by the test');
        },
      },
    );
    await producer.start();
  });

  afterAll(async () => {
    await producer?.shutdown();
    await collector?.stop();
    await ds?.destroy();
  });

  it('not SENT after the lost EndTransaction; SENT after the check-back answered COMMIT; delivered once', async () => {
    const r = await producer.transact({ topic: TOPIC, body: { confirm: 1 } }, async () => undefined);
    const [eventId] = r.eventIds;
    expect((await outboxRow(ds, eventId!))?.status).not.toBe('SENT');
    expect(producer.stats.checkBack.commit).toBe(0);

    await waitFor(async () => (await outboxRow(ds, eventId!))?.status === 'SENT', {
      timeoutMs: 60_000,
      description: `event ${eventId} confirmed SENT by the check-back's COMMIT answer`,
    });
    expect(producer.stats.checkBack.commit).toBeGreaterThanOrEqual(1);
    await waitFor(async () => collector.withProperty('EVENT_ID', eventId!).length > 0, {
      timeoutMs: 30_000,
      description: `event ${eventId} delivered`,
    });
    expect(producer.stats.discardRecovery?.republished ?? 0).toBe(0);
  }, 120_000);
});
