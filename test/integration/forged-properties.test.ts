/**
 * Hostile input against the real broker and MariaDB:
 * - transact with generated bad events writes nothing (row counts of our tables unchanged);
 * - half messages sent by the raw client with a forged or malformed TX_ID / TX_ORIGIN / EVENT_ID
 *   are answered UNKNOWN by our check-back (never COMMIT or ROLLBACK), and no tx_record is written;
 * - normal messages whose EVENT_ID / TX_ID contradict or break the envelope are rejected by the
 *   IdempotentConsumer (MALFORMED), the handler never runs and no consumed_event row is written.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import { Producer } from 'rocketmq-client-nodejs';
import { TransactionResolution as ProtoResolution } from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb';
import {
  IdempotentConsumer,
  InvalidMessageError,
  RocketMqTxError,
  type ConsumeOutcome,
  type TransactionalProducer,
} from '../../src';
import type { CheckBackOutcome } from '../../src/checkback/CheckBackDispatcher';
import { uuidv7 } from '../../src/util/uuidv7';
import { ENDPOINTS, waitFor } from '../helpers/env';
import { ensureSchema, openDataSource, sql } from '../helpers/db';
import { makeProducer } from '../helpers/producer';

const TX_TOPIC = 'rmqtx_tx_18';
const NORMAL_TOPIC = 'rmqtx_normal_11';
const RUN = randomUUID().slice(0, 8);
const GROUP = `rmqtx_forged_${RUN}`;
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

let ds: DataSource;
let producer: TransactionalProducer;
const outcomes: CheckBackOutcome[] = [];

beforeAll(async () => {
  ds = await openDataSource();
  await ensureSchema(ds);
  producer = makeProducer(ds, {
    topics: [TX_TOPIC],
    producerGroup: GROUP,
    checkBack: { onResolved: (o) => outcomes.push(o) },
  });
  await producer.start();
}, 60_000);

afterAll(async () => {
  await producer?.shutdown();
  await ds?.destroy();
});

async function countsFor(group: string) {
  const [tx] = await ds.query(sql('SELECT COUNT(*) AS n FROM tx_record WHERE producer_group = ?'), [group]);
  const [ob] = await ds.query(
    sql(
      'SELECT COUNT(*) AS n FROM outbox_event o JOIN tx_record t ON t.tx_id = o.tx_id WHERE t.producer_group = ?',
    ),
    [group],
  );
  const [orders] = await ds.query(sql('SELECT COUNT(*) AS n FROM test_order WHERE id LIKE ?'), [
    `forged-${RUN}-%`,
  ]);
  return { tx: Number(tx.n), outbox: Number(ob.n), orders: Number(orders.n) };
}

describe('transact with generated bad events', () => {
  it('rejects each with a typed error before any write (row counts unchanged, work never runs)', async () => {
    const before = await countsFor(GROUP);
    const bad = fc.oneof(
      fc.record({
        topic: fc.constant(TX_TOPIC),
        body: fc.constant('x'),
        properties: fc.constant({ TX_ID: 'x' }),
      }),
      fc.record({ topic: fc.string(), body: fc.string({ minLength: 1 }) }),
      fc.record({ topic: fc.constant(TX_TOPIC), body: fc.constant('x'), keys: fc.constant(['a b']) }),
      fc.record({ topic: fc.constant(TX_TOPIC), body: fc.constant('x'), tag: fc.constant('a|b') }),
      fc.record({ topic: fc.constant(TX_TOPIC), body: fc.anything(), eventId: fc.string() }),
      fc.array(fc.constant({ topic: TX_TOPIC, body: 'x' }), { minLength: 65, maxLength: 70 }),
      fc.anything(),
    );
    let workRan = 0;
    await fc.assert(
      fc.asyncProperty(bad, async (events) => {
        const id = `forged-${RUN}-${randomUUID().slice(0, 8)}`;
        const err = await producer
          .transact(events as never, async (manager) => {
            workRan++;
            await manager.query(sql('INSERT INTO test_order (id) VALUES (?)'), [id]);
          })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(err).toBeInstanceOf(RocketMqTxError);
        expect(err).toBeInstanceOf(InvalidMessageError);
      }),
      { numRuns: 300 },
    );
    expect(workRan).toBe(0);
    expect(await countsFor(GROUP)).toEqual(before);
  }, 60_000);
});

describe('check-back of half messages with forged properties (sent by the raw client)', () => {
  it('answers UNKNOWN, never COMMIT or ROLLBACK, and writes no tx_record', async () => {
    // A real committed transaction of ours: its TX_ID is then copied with a malformed EVENT_ID.
    const real = await producer.transact({ topic: TX_TOPIC, body: 'real' }, async () => undefined);
    const marker = `forged_${RUN}`;
    const cases: Record<string, Record<string, string>> = {
      malformedTxId: { TX_ID: "x' OR '1'='1", TX_ORIGIN: GROUP, EVENT_ID: uuidv7() },
      upperCaseTxId: { TX_ID: uuidv7().toUpperCase(), TX_ORIGIN: GROUP, EVENT_ID: uuidv7() },
      foreignOrigin: { TX_ID: uuidv7(), TX_ORIGIN: `${GROUP}_other`, EVENT_ID: uuidv7() },
      missingOrigin: { TX_ID: uuidv7(), EVENT_ID: uuidv7() },
      copiedTxIdBadEventId: { TX_ID: real.txId, TX_ORIGIN: GROUP, EVENT_ID: 'not-a-uuid' },
    };
    const raw = new Producer({
      endpoints: ENDPOINTS,
      namespace: '',
      topics: [TX_TOPIC],
      logger: quiet,
      // The raw producer never decides: every check-back must be decided by ours.
      checker: { check: async () => ProtoResolution.TRANSACTION_RESOLUTION_UNSPECIFIED },
    } as ConstructorParameters<typeof Producer>[0]);
    await raw.startup();
    const messageIds = new Map<string, string>();
    try {
      for (const [name, props] of Object.entries(cases)) {
        const tx = raw.beginTransaction();
        const receipt = await raw.send(
          {
            topic: TX_TOPIC,
            body: Buffer.from(name),
            keys: [marker],
            properties: new Map(Object.entries({ ...props, forged_case: name })),
          },
          tx,
        );
        messageIds.set(receipt.messageId, name);
      }
    } finally {
      // Gone before the first check (transactionTimeOut 1 s): the proxy asks our producer.
      await raw.shutdown().catch(() => undefined);
    }
    const ours = () => outcomes.filter((o) => messageIds.has(o.messageId));
    await waitFor(() => new Set(ours().map((o) => o.messageId)).size === messageIds.size, {
      timeoutMs: 45_000,
      description: 'a check-back of every forged half message on our producer',
    });
    for (const o of ours())
      expect({ case: messageIds.get(o.messageId), answer: o.resolution }).toEqual({
        case: messageIds.get(o.messageId),
        answer: 'UNKNOWN',
      });
    const forgedTxIds = Object.values(cases)
      .map((p) => p.TX_ID!)
      .filter((t) => t !== real.txId);
    const rows = await ds.query(
      sql(`SELECT tx_id FROM tx_record WHERE tx_id IN (${forgedTxIds.map(() => '?').join(',')})`),
      forgedTxIds,
    );
    expect(rows).toEqual([]);
    const [realRow] = await ds.query(sql('SELECT status FROM tx_record WHERE tx_id = ?'), [real.txId]);
    expect(realRow.status).toBe('COMMITTED');
  }, 90_000);
});

describe('IdempotentConsumer and messages with forged properties (sent by the raw client)', () => {
  it('rejects each as MALFORMED: no handler call, no consumed_event row', async () => {
    const group = `rmqtx_forged_consumer_${RUN}`;
    const tag = `forged${RUN}`;
    const envelope = (aggregateId: string) => ({
      eventId: uuidv7(),
      eventType: 'ForgedProbe',
      eventVersion: 1,
      aggregateType: 'Probe',
      aggregateId,
      aggregateVersion: 1,
      occurredAt: new Date().toISOString(),
      traceId: null,
      data: {},
    });
    const cases = {
      eventIdMismatch: (_e: ReturnType<typeof envelope>) => ({ EVENT_ID: uuidv7(), TX_ID: uuidv7() }),
      malformedTxId: (e: ReturnType<typeof envelope>) => ({ EVENT_ID: e.eventId, TX_ID: 'forged' }),
      aggregateMismatch: (e: ReturnType<typeof envelope>) => ({ EVENT_ID: e.eventId, AGGREGATE_ID: 'other' }),
    };
    const handled: string[] = [];
    const settled: ConsumeOutcome[] = [];
    const consumer = new IdempotentConsumer({
      endpoints: ENDPOINTS,
      dataSource: ds,
      consumerGroup: group,
      subscriptions: [{ topic: NORMAL_TOPIC, tag }],
      handlers: [
        { eventType: 'ForgedProbe', eventVersion: 1, handle: async (e) => void handled.push(e.eventId) },
      ],
      onOutcome: (o) => settled.push(o),
      startTimeoutMs: 30_000,
    });
    await consumer.start();
    const raw = new Producer({ endpoints: ENDPOINTS, namespace: '', topics: [NORMAL_TOPIC], logger: quiet });
    await raw.startup();
    const sentIds: string[] = [];
    try {
      for (const [name, props] of Object.entries(cases)) {
        const e = envelope(`probe-${name}-${RUN}`);
        sentIds.push(e.eventId);
        await raw.send({
          topic: NORMAL_TOPIC,
          tag,
          body: Buffer.from(JSON.stringify(e)),
          keys: [e.eventId],
          properties: new Map(Object.entries(props(e))),
        });
      }
    } finally {
      await raw.shutdown().catch(() => undefined);
    }
    try {
      await waitFor(() => settled.filter((o) => o.kind === 'MALFORMED').length >= sentIds.length, {
        timeoutMs: 45_000,
        description: 'every forged message settled as MALFORMED',
      });
    } finally {
      await consumer.shutdown();
    }
    expect(handled).toEqual([]);
    expect(settled.every((o) => o.kind === 'MALFORMED')).toBe(true);
    const rows = await ds.query(
      sql(
        `SELECT event_id FROM consumed_event WHERE consumer_group = ? AND event_id IN (${sentIds.map(() => '?').join(',')})`,
      ),
      [group, ...sentIds],
    );
    expect(rows).toEqual([]);
  }, 90_000);
});
