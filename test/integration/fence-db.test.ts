import type { DataSource } from 'typeorm';
import {
  TransactionResolution,
  TxRecordResolver,
  TypeOrmTxRecordStore,
  uuidv7,
  type CheckBackMessage,
} from '../../src';
import { ensureSchema, openDataSource, txRecord } from '../helpers/db';
import { waitFor } from '../helpers/env';

/** The fence against real MariaDB: several resolver instances (own pools) race on one txId. */
describe('tx_record fence on MariaDB', () => {
  const GROUP = 'it_fence_db';
  let producerDs: DataSource;
  const instances: Array<{ ds: DataSource; resolver: TxRecordResolver }> = [];

  beforeAll(async () => {
    producerDs = await openDataSource();
    await ensureSchema(producerDs);
    for (let i = 0; i < 4; i++) {
      const ds = await openDataSource({ poolSize: 4 });
      instances.push({
        ds,
        resolver: new TxRecordResolver(new TypeOrmTxRecordStore(ds), {
          producerGroup: GROUP,
          lockWaitTimeoutMs: 1000,
        }),
      });
    }
  });

  afterAll(async () => {
    await Promise.all(instances.map((i) => i.ds.destroy()));
    await producerDs.destroy();
  });

  const message = (txId: string): CheckBackMessage => ({
    messageId: `m-${txId}`,
    topic: 'rmqtx_tx_9',
    keys: [],
    properties: {},
    body: Buffer.from('x'),
    txId,
    origin: GROUP,
  });

  /** Two check-backs per instance, all at once. */
  const checkAll = (txId: string) =>
    Promise.all(
      instances.flatMap((i) => [i.resolver.resolve(message(txId)), i.resolver.resolve(message(txId))]),
    );

  /** Opens a producer-side transaction holding the tx_record row lock, as the producer does. */
  async function openProducerTx(txId: string) {
    const qr = producerDs.createQueryRunner();
    await qr.connect();
    await qr.startTransaction();
    const store = new TypeOrmTxRecordStore(producerDs);
    const inserted = await store.insertCommitted(qr.manager, {
      txId,
      producerGroup: GROUP,
      topic: 'rmqtx_tx_9',
      eventCount: 1,
    });
    return { qr, inserted };
  }

  /** Waits until at least one check-back INSERT for txId is blocked on the producer's row lock. */
  async function waitForLockWaiters(txId: string): Promise<void> {
    await waitFor(
      async () => {
        const rows = await producerDs.query(
          "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE command = 'Query' AND info LIKE ?",
          [`INSERT INTO tx_record %${txId}%`],
        );
        return Number(rows[0].n) >= 1;
      },
      { timeoutMs: 900, intervalMs: 20, description: 'a check-back waiting on the producer row lock' },
    );
  }

  it('no row at all: exactly one tombstone; every answer is ROLLBACK or UNKNOWN; later checks read ROLLBACK', async () => {
    const txId = uuidv7();
    const answers = await checkAll(txId);
    expect(answers.every((a) => a === 'ROLLBACK' || a === 'UNKNOWN')).toBe(true);
    expect(answers).toContain('ROLLBACK');
    expect(await txRecord(producerDs, txId)).toMatchObject({
      status: 'ROLLED_BACK',
      resolved_by: 'CHECK_BACK',
    });
    const rows = await producerDs.query('SELECT COUNT(*) AS n FROM tx_record WHERE tx_id = ?', [txId]);
    expect(Number(rows[0].n)).toBe(1);
    expect(await checkAll(txId)).toEqual(Array(8).fill(TransactionResolution.ROLLBACK));
  });

  it('producer transaction open, then COMMIT: no instance ever answers ROLLBACK', async () => {
    const txId = uuidv7();
    const { qr, inserted } = await openProducerTx(txId);
    expect(inserted).toBe(true);
    const racing = checkAll(txId);
    // Commit while the check-backs wait on the row lock (lock wait is 1 s).
    await waitForLockWaiters(txId);
    await qr.commitTransaction();
    await qr.release();
    const answers = await racing;
    expect(answers.filter((a) => a === 'ROLLBACK')).toEqual([]);
    expect(answers).toContain('COMMIT');
    expect(await checkAll(txId)).toEqual(Array(8).fill(TransactionResolution.COMMIT));
  });

  it('producer transaction open, then ROLLBACK: one tombstone, never COMMIT; deadlock victims answer UNKNOWN', async () => {
    const txId = uuidv7();
    const { qr } = await openProducerTx(txId);
    const racing = checkAll(txId);
    await waitForLockWaiters(txId);
    await qr.rollbackTransaction();
    await qr.release();
    const answers = await racing;
    expect(answers.filter((a) => a === 'COMMIT')).toEqual([]);
    expect(await txRecord(producerDs, txId)).toMatchObject({
      status: 'ROLLED_BACK',
      resolved_by: 'CHECK_BACK',
    });
    expect(await checkAll(txId)).toEqual(Array(8).fill(TransactionResolution.ROLLBACK));
  });

  it('producer holding the row past the lock wait: UNKNOWN (not ROLLBACK), then COMMIT once it commits', async () => {
    const txId = uuidv7();
    const { qr } = await openProducerTx(txId);
    const first = await instances[0]!.resolver.resolve(message(txId));
    expect(first).toBe('UNKNOWN');
    await qr.commitTransaction();
    await qr.release();
    await expect(instances[1]!.resolver.resolve(message(txId))).resolves.toBe('COMMIT');
  });

  it('a fenced txId makes the producer insert fail: insertCommitted returns false', async () => {
    const txId = uuidv7();
    await expect(instances[0]!.resolver.resolve(message(txId))).resolves.toBe('ROLLBACK');
    const { qr, inserted } = await openProducerTx(txId);
    expect(inserted).toBe(false);
    await qr.rollbackTransaction();
    await qr.release();
  });

  it('a transaction that already has its row is answered from it: no tombstone INSERT, no session change', async () => {
    const committed = uuidv7();
    const { qr } = await openProducerTx(committed);
    await qr.commitTransaction();
    await qr.release();
    const ds = await openDataSource({ poolSize: 1 });
    try {
      const resolver = new TxRecordResolver(new TypeOrmTxRecordStore(ds), {
        producerGroup: GROUP,
        lockWaitTimeoutMs: 1000,
      });
      const fenced = uuidv7();
      await expect(resolver.resolve(message(fenced))).resolves.toBe('ROLLBACK');
      // One pooled connection: its session counters see every statement the fence sends.
      const counters = async () => {
        const rows: Array<{ Variable_name: string; Value: string }> = await ds.query(
          "SHOW SESSION STATUS WHERE Variable_name IN ('Com_insert', 'Com_set_option')",
        );
        return Object.fromEntries(rows.map((r) => [r.Variable_name, Number(r.Value)]));
      };
      const before = await counters();
      await expect(resolver.resolve(message(committed))).resolves.toBe('COMMIT');
      await expect(resolver.resolve(message(fenced))).resolves.toBe('ROLLBACK');
      expect(await counters()).toEqual(before);
      expect(await txRecord(producerDs, committed)).toMatchObject({
        status: 'COMMITTED',
        resolved_by: 'PRODUCER',
      });
    } finally {
      await ds.destroy();
    }
  });

  it('restores the session lock-wait timeout on the pooled connection', async () => {
    const ds = await openDataSource({ poolSize: 1 });
    try {
      const resolver = new TxRecordResolver(new TypeOrmTxRecordStore(ds), {
        producerGroup: GROUP,
        lockWaitTimeoutMs: 1000,
      });
      const before = await ds.query('SELECT CONNECTION_ID() AS id, @@SESSION.innodb_lock_wait_timeout AS t');
      await resolver.resolve(message(uuidv7()));
      const after = await ds.query('SELECT CONNECTION_ID() AS id, @@SESSION.innodb_lock_wait_timeout AS t');
      expect(after[0].id).toBe(before[0].id);
      expect(Number(before[0].t)).not.toBe(1);
      expect(Number(after[0].t)).toBe(Number(before[0].t));
    } finally {
      await ds.destroy();
    }
  });
});
