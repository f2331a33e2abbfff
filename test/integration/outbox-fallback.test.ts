import type { DataSource, EntityManager } from 'typeorm';
import { BrokerUnavailableError, type OutboxRelay, type TransactionalProducer } from '../../src';
import { Collector } from '../helpers/collector';
import { ensureSchema, openDataSource, orderExists, sql } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';
import { countByStatus, makeRelay, outboxRow } from '../helpers/relay';
import { TcpProxy } from '../helpers/tcpProxy';

const TOPIC = 'rmqtx_tx_12';
const GROUP = 'it_outbox_fallback';
const RUN = Math.random().toString(36).slice(2, 8);

describe('outboxFallback against the real broker, cut by a TCP proxy', () => {
  let ds: DataSource;
  let proxy: TcpProxy;
  let withFallback: TransactionalProducer;
  let withoutFallback: TransactionalProducer;
  let relay: OutboxRelay | undefined;
  let collector: Collector;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    collector = await new Collector(TOPIC).start(); // direct: never cut
    // The proxy's routes name its own port (8081), not the address a client dialled, so a plain
    // TCP proxy in front of it would only carry start-up. As an HTTP CONNECT proxy set in
    // grpc_proxy it carries every channel the producers open, including the route's.
    proxy = await new TcpProxy('', 0, { httpConnect: true }).start();
    process.env.grpc_proxy = `http://127.0.0.1:${proxy.port}`;
    withFallback = makeProducer(ds, {
      topics: [TOPIC],
      producerGroup: GROUP,
      outboxFallback: true,
      requestTimeoutMs: 1000,
    });
    withoutFallback = makeProducer(ds, { topics: [TOPIC], producerGroup: GROUP, requestTimeoutMs: 1000 });
    await Promise.all([withFallback.start(), withoutFallback.start()]);
  });

  afterAll(async () => {
    delete process.env.grpc_proxy;
    proxy?.restore();
    await relay?.shutdown();
    await Promise.all([withFallback?.shutdown(), withoutFallback?.shutdown()]);
    await collector?.stop();
    await proxy?.stop();
    await ds?.destroy();
  });

  const groupTxRecords = async () =>
    Number(
      (await ds.query(sql('SELECT COUNT(*) AS n FROM tx_record WHERE producer_group = ?'), [GROUP]))[0].n,
    );
  const order = (label: string) => `fb-${RUN}-${label}`;
  const insertOrder = (id: string) => async (m: EntityManager) => {
    await m.query(sql('INSERT INTO test_order (id) VALUES (?)'), [id]);
  };

  it('while the broker is unreachable: with the fallback the business commits with its events NEW, without it a BrokerUnavailableError and nothing written; after restore the relay delivers exactly the committed events', async () => {
    // Reachable first: both producers' paths (access point and route) open through the proxy.
    const normal = await withFallback.transact(
      { topic: TOPIC, body: { run: RUN, n: 'before' } },
      insertOrder(order('before')),
    );
    expect(normal.delivery).toBe('transactional');
    const strictBefore = await withoutFallback.transact(
      { topic: TOPIC, body: { run: RUN, n: 'strict-before' } },
      insertOrder(order('strict-before')),
    );
    expect(proxy.tunnels).toBeGreaterThan(0);

    proxy.cut();
    const committed: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await withFallback.transact(
        [
          { topic: TOPIC, body: { run: RUN, i, part: 1 } },
          { topic: TOPIC, body: { run: RUN, i, part: 2 } },
        ],
        insertOrder(order(`fallback-${i}`)),
      );
      expect(r.delivery).toBe('outbox');
      expect(r.messageIds).toEqual([]);
      expect(await orderExists(ds, order(`fallback-${i}`))).toBe(true);
      for (const id of r.eventIds) expect((await outboxRow(ds, id))?.status).toBe('NEW');
      committed.push(...r.eventIds);
    }
    expect(withFallback.stats.outboxFallbacks).toBe(3);

    // Work that throws under the fallback: rolled back, no row, never delivered.
    let rolledBackId = '';
    await expect(
      withFallback.transact({ topic: TOPIC, body: { run: RUN, n: 'rollback' } }, async (m, c) => {
        rolledBackId = c.eventIds[0]!;
        await insertOrder(order('rollback'))(m);
        throw new Error('business says no');
      }),
    ).rejects.toThrow('business says no');
    expect(await outboxRow(ds, rolledBackId)).toBeUndefined();
    expect(await orderExists(ds, order('rollback'))).toBe(false);

    // Without the fallback: a typed, retriable error; neither the business row nor any event.
    let strictId = '';
    const txRecordsBefore = await groupTxRecords();
    const err = await withoutFallback
      .transact({ topic: TOPIC, body: { run: RUN, n: 'strict' } }, async (m, c) => {
        strictId = c.eventIds[0]!;
        await insertOrder(order('strict'))(m);
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokerUnavailableError);
    expect((err as BrokerUnavailableError).retriable).toBe(true);
    expect(strictId).toBe(''); // work never ran: the half message failed first
    expect(await orderExists(ds, order('strict'))).toBe(false);
    expect(await groupTxRecords()).toBe(txRecordsBefore);
    const strictRows = await ds.query(
      sql('SELECT COUNT(*) AS n FROM outbox_event WHERE CAST(payload AS CHAR) LIKE ?'),
      [`%"run":"${RUN}","n":"strict"%`],
    );
    expect(Number(strictRows[0].n)).toBe(0);
    expect(await countByStatus(ds, committed, 'NEW')).toBe(committed.length);

    proxy.restore();
    delete process.env.grpc_proxy;
    // The relay's own client goes straight to the broker; it delivers the NEW rows as half + commit.
    relay = makeRelay(ds, { topics: [TOPIC], transactionTopics: [TOPIC] }).relay;
    await relay.start();
    await waitFor(async () => (await countByStatus(ds, committed, 'SENT')) === committed.length, {
      timeoutMs: 60_000,
      description: 'the relay marks every fallback event SENT',
    });
    await waitFor(() => committed.every((id) => collector.withProperty('EVENT_ID', id).length > 0), {
      timeoutMs: 60_000,
      description: 'every fallback event received',
    });
    const ofRun = collector.received.filter((m) => m.body.includes(`"run":"${RUN}"`));
    const seen = new Set(ofRun.map((m) => m.properties.EVENT_ID));
    expect(seen).toEqual(new Set([normal.eventIds[0], strictBefore.eventIds[0], ...committed]));
    expect(seen.has(rolledBackId)).toBe(false);

    // After the outage the strict producer recovers (grpc-js may first wait out its reconnect backoff).
    let recovered: string | undefined;
    await waitFor(
      async () => {
        const r = await withoutFallback
          .transact({ topic: TOPIC, body: { run: RUN, n: 'after' } }, insertOrder(order('after')))
          .catch((e: unknown) => {
            if (!(e instanceof BrokerUnavailableError)) throw e;
            return undefined;
          });
        recovered = r?.eventIds[0];
        return r !== undefined;
      },
      { timeoutMs: 90_000, intervalMs: 1000, description: 'a transaction through the restored proxy' },
    );
    await waitFor(() => collector.withProperty('EVENT_ID', recovered!).length > 0, {
      timeoutMs: 60_000,
      description: 'the post-outage transaction delivered',
    });
  });
});
