import type { DataSource } from 'typeorm';
import { uuidv7 } from '../../src';
import { Collector } from '../helpers/collector';
import { TEST_DATABASE, ensureSchema, openDataSource, sql, txRecord } from '../helpers/db';
import { DB_URL, waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';
import { TcpProxy } from '../helpers/tcpProxy';

const TOPIC = 'rmqtx_tx_3';
const GROUP = 'it_db_outage';

describe('database unreachable during check-back', () => {
  let ds: DataSource;
  let collector: Collector;
  let proxy: TcpProxy;
  let viaProxy: DataSource;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    collector = await new Collector(TOPIC).start();
    const url = new URL(DB_URL);
    proxy = await new TcpProxy(
      url.hostname,
      Number(url.port || (TEST_DATABASE === 'postgres' ? 5432 : 3306)),
    ).start();
    url.host = `127.0.0.1:${proxy.port}`;
    viaProxy = await openDataSource({ url: url.toString(), poolSize: 2 });
  });

  afterAll(async () => {
    await viaProxy?.destroy().catch(() => undefined);
    await proxy?.stop();
    await collector?.stop();
    await ds?.destroy();
  });

  it('answers UNKNOWN (never ROLLBACK) while the database is down, and COMMIT after recovery', async () => {
    // The instance that will be asked: its database connection goes through the proxy.
    const checker = makeProducer(viaProxy, {
      topics: [TOPIC],
      producerGroup: GROUP,
      checkBack: { lockWaitTimeoutMs: 1000 },
    });
    await checker.start();
    // The instance that commits, then "dies" before EndTransaction (the reply is dropped).
    const committer = makeProducer(
      ds,
      { topics: [TOPIC], producerGroup: GROUP },
      { beforeEnd: async () => false },
    );
    await committer.start();
    try {
      proxy.cut();
      const orderId = `outage-${uuidv7()}`;
      const { txId } = await committer.transact({ topic: TOPIC, body: { orderId } }, async (m) => {
        await m.query(sql('INSERT INTO test_order (id) VALUES (?)'), [orderId]);
      });
      await committer.shutdown();

      await waitFor(() => checker.stats.checkBack.unknown >= 2, {
        timeoutMs: 30_000,
        description: 'two check-backs answered UNKNOWN while the database is unreachable',
      });
      expect(checker.stats.checkBack.rollback).toBe(0);
      expect(checker.stats.checkBack.commit).toBe(0);
      expect(collector.withProperty('TX_ID', txId)).toEqual([]);
      expect(await txRecord(ds, txId)).toMatchObject({ status: 'COMMITTED', resolved_by: 'PRODUCER' });

      proxy.restore();
      await waitFor(() => collector.withProperty('TX_ID', txId).length > 0, {
        timeoutMs: 30_000,
        description: 'delivery by check-back after the database came back',
      });
      expect(checker.stats.checkBack.commit).toBeGreaterThanOrEqual(1);
      expect(checker.stats.checkBack.rollback).toBe(0);
    } finally {
      proxy.restore();
      await committer.shutdown();
      await checker.shutdown();
    }
  });
});
