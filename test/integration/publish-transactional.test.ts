import type { DataSource } from 'typeorm';
import {
  addTransactionalDataSource,
  deleteDataSourceByName,
  initializeTransactionalContext,
  Propagation,
  runInTransaction,
  StorageDriver,
} from 'typeorm-transactional';
import { NoActiveTransactionError, TransactionalProducer, uuidv7, type PublishResult } from '../../src';
import { Collector } from '../helpers/collector';
import { ensureSchema, openDataSource, orderExists, sql, txRecord } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';

const TOPIC = 'rmqtx_tx_join_2';
const GROUP = 'it_publish_cls';

/**
 * publish() with the manager typeorm-transactional (the real library, CLS-based) hands out:
 * inside runInTransaction/@Transactional(), its patched dataSource.manager is the transaction's.
 */
describe('publish() under typeorm-transactional (REQUIRED, NESTED, REQUIRES_NEW)', () => {
  let ds: DataSource;
  let collector: Collector;
  let producer: TransactionalProducer;

  beforeAll(async () => {
    initializeTransactionalContext({ storageDriver: StorageDriver.AUTO });
    ds = await openDataSource();
    await ensureSchema(ds);
    addTransactionalDataSource(ds);
    collector = await new Collector(TOPIC).start();
    producer = makeProducer(ds, { topics: [TOPIC], producerGroup: GROUP });
    await producer.start();
  });

  afterAll(async () => {
    await producer?.shutdown();
    await collector?.stop();
    deleteDataSourceByName('default');
    await ds?.destroy();
  });

  const insertOrder = (id: string) =>
    ds.manager.query(sql('INSERT INTO test_order (id, note) VALUES (?, ?)'), [id, 'cls']);
  const publish = (body: string) => producer.publish(ds.manager, { topic: TOPIC, body });
  const delivered = (r: PublishResult) => collector.withProperty('TX_ID', r.txId);

  async function flush(): Promise<void> {
    const marker = await runInTransaction(() => publish(`marker-${uuidv7()}`));
    await waitFor(() => delivered(marker).length > 0, { description: 'marker delivered' });
  }

  it('outside a transaction the patched manager has none: NoActiveTransactionError', async () => {
    await expect(publish('never')).rejects.toBeInstanceOf(NoActiveTransactionError);
  });

  it('REQUIRED inside REQUIRED: one transaction, one txId, delivered after the outer commit', async () => {
    const id = `order-${uuidv7()}`;
    const [outer, inner] = await runInTransaction(async () => {
      await insertOrder(id);
      const a = await publish('required-outer');
      const b = await runInTransaction(() => publish('required-inner'), {
        propagation: Propagation.REQUIRED,
      });
      return [a, b] as const;
    });
    expect(inner.txId).toBe(outer.txId);
    await expect(outer.outcome).resolves.toBe('committed');
    expect(await orderExists(ds, id)).toBe(true);
    await waitFor(() => delivered(outer).length === 2, { description: 'both events delivered' });
  });

  it('NESTED then an outer rollback: the nested publish follows the transaction its manager really holds', async () => {
    // typeorm-transactional 0.5 runs NESTED through dataSource.transaction(); measured here with
    // TypeORM 0.3 it opened its OWN QueryRunner (a separate transaction that COMMITs on its own),
    // not a savepoint of the outer one. publish() follows the database either way: the event
    // goes out exactly when the transaction that holds its fence row committed.
    const id = `order-${uuidv7()}`;
    const abort = new Error('outer fails after the nested step');
    let nested: PublishResult | undefined;
    let sameRunner: boolean | undefined;
    await expect(
      runInTransaction(async () => {
        await insertOrder(id);
        const outerRunner = ds.manager.queryRunner;
        nested = await runInTransaction(
          async () => {
            sameRunner = ds.manager.queryRunner === outerRunner;
            return publish('nested');
          },
          { propagation: Propagation.NESTED },
        );
        throw abort;
      }),
    ).rejects.toBe(abort);
    expect(await orderExists(ds, id)).toBe(false);
    if (sameRunner) {
      // A savepoint of the outer transaction: rolled back with it, never delivered.
      await expect(nested!.outcome).resolves.toBe('rolled_back');
      expect(await txRecord(ds, nested!.txId)).toBeUndefined();
      await flush();
      expect(delivered(nested!)).toEqual([]);
    } else {
      // Its own transaction, committed before the outer rolled back: delivered once.
      await expect(nested!.outcome).resolves.toBe('committed');
      expect(await txRecord(ds, nested!.txId)).toBeDefined();
      await waitFor(() => delivered(nested!).length > 0, { description: 'nested event delivered' });
      await flush();
      expect(delivered(nested!)).toHaveLength(1);
    }
  });

  it('NESTED rolled back, outer commits: only the outer events are delivered', async () => {
    const failure = new Error('nested fails');
    let undone: PublishResult | undefined;
    const outer = await runInTransaction(async () => {
      await runInTransaction(
        async () => {
          undone = await publish('nested-undone');
          throw failure;
        },
        { propagation: Propagation.NESTED },
      ).catch((e: unknown) => {
        if (e !== failure) throw e;
      });
      return publish('outer-kept');
    });
    await expect(outer.outcome).resolves.toBe('committed');
    await waitFor(() => delivered(outer).length > 0, { description: 'outer event delivered' });
    await flush();
    const bodies = delivered(outer).map((m) => m.body);
    expect(bodies).toEqual(['outer-kept']);
    expect(collector.withProperty('EVENT_ID', undone!.eventIds[0]!)).toEqual([]);
  });

  it('REQUIRES_NEW: its own transaction and txId, committed even when the outer rolls back', async () => {
    const abort = new Error('outer fails');
    let own: PublishResult | undefined;
    let outerResult: PublishResult | undefined;
    await expect(
      runInTransaction(async () => {
        outerResult = await publish('outer-rolled-back');
        own = await runInTransaction(() => publish('requires-new'), {
          propagation: Propagation.REQUIRES_NEW,
        });
        throw abort;
      }),
    ).rejects.toBe(abort);
    expect(own!.txId).not.toBe(outerResult!.txId);
    await expect(own!.outcome).resolves.toBe('committed');
    await expect(outerResult!.outcome).resolves.toBe('rolled_back');
    await waitFor(() => delivered(own!).length > 0, { description: 'REQUIRES_NEW event delivered' });
    await flush();
    expect(delivered(outerResult!)).toEqual([]);
  });
});
