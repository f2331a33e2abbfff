import type { DataSource } from 'typeorm';
import { OutboxRelay, TransactionalProducer, TypeOrmOutboxStore, uuidv7 } from '../../src';
import { LeanGateway } from '../../src/broker/lean/LeanGateway';
import { Collector } from '../helpers/collector';
import { ensureSchema, openDataSource, sql } from '../helpers/db';
import { ENDPOINTS, waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';
import { countByStatus, makeRelay, outboxRow } from '../helpers/relay';

const NORMAL = 'rmqtx_normal_1';
const TX_TOPIC = 'rmqtx_tx_8';
const GROUP = 'it_outbox';

describe('outbox_event rows and the OutboxRelay against the real broker and MariaDB', () => {
  let ds: DataSource;
  let producer: TransactionalProducer;
  let normal: Collector;
  let tx: Collector;
  const relays: OutboxRelay[] = [];

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    [normal, tx] = await Promise.all([new Collector(NORMAL).start(), new Collector(TX_TOPIC).start()]);
    producer = makeProducer(ds, { topics: [NORMAL, TX_TOPIC], producerGroup: GROUP, delivery: 'outbox' });
    await producer.start();
  });

  afterAll(async () => {
    await Promise.all(relays.map((r) => r.shutdown()));
    await producer?.shutdown();
    await Promise.all([normal?.stop(), tx?.stop()]);
    await ds?.destroy();
  });

  function startRelay(...args: Parameters<typeof makeRelay>) {
    const made = makeRelay(...args);
    relays.push(made.relay);
    return made;
  }

  const seen = (c: Collector, id: string) => c.withProperty('EVENT_ID', id).length;

  it('transactional delivery writes IN_FLIGHT rows in the same transaction and marks them SENT once confirmed', async () => {
    const r = await producer.transact({ topic: TX_TOPIC, body: { n: 1 } }, async () => 'ok', {
      delivery: 'transactional',
    });
    expect(r.delivery).toBe('transactional');
    await waitFor(async () => (await outboxRow(ds, r.eventIds[0]!))?.status === 'SENT', {
      description: 'confirmation batch marks the row SENT',
    });
    await waitFor(() => seen(tx, r.eventIds[0]!) === 1, { description: 'half message committed' });
  });

  it('a rolled-back transaction leaves no outbox row', async () => {
    let eventId = '';
    await expect(
      producer.transact({ topic: NORMAL, body: 'x' }, async (_m, c) => {
        eventId = c.eventIds[0]!;
        throw new Error('business says no');
      }),
    ).rejects.toThrow('business says no');
    expect(await outboxRow(ds, eventId)).toBeUndefined();
  });

  it('outbox delivery: no half message, NEW rows; the relay delivers them (normal topic plainly, TRANSACTION topic as half + commit) with the same eventId', async () => {
    const results = [];
    for (let i = 0; i < 5; i++) {
      results.push(
        await producer.transact(
          [
            { topic: NORMAL, tag: 'outbox', body: { i } },
            { topic: TX_TOPIC, body: { i } },
          ],
          async (m, c) => {
            await m.query(sql('INSERT INTO test_order (id) VALUES (?)'), [c.txId]);
          },
        ),
      );
    }
    const ids = results.flatMap((r) => r.eventIds);
    expect(results.every((r) => r.messageIds.length === 0)).toBe(true);
    expect(await countByStatus(ds, ids, 'NEW')).toBe(ids.length);
    startRelay(ds, { topics: [NORMAL, TX_TOPIC], transactionTopics: [TX_TOPIC] });
    await relays[relays.length - 1]!.start();
    await waitFor(async () => (await countByStatus(ds, ids, 'SENT')) === ids.length, {
      description: 'all rows SENT',
    });
    await waitFor(() => ids.every((id) => seen(normal, id) + seen(tx, id) >= 1), {
      description: 'all events delivered',
    });
    const msg = normal.withProperty('EVENT_ID', results[0]!.eventIds[0]!)[0]!;
    expect(msg).toMatchObject({ tag: 'outbox', body: '{"i":0}' });
    expect(msg.keys[0]).toBe(results[0]!.eventIds[0]);
    expect(msg.properties.TX_ID).toBe(results[0]!.txId);
  });

  it("transport 'lean': the relay delivers NEW rows to a normal and a TRANSACTION topic with the same eventId", async () => {
    await Promise.all(relays.splice(0).map((r) => r.shutdown()));
    const results = [];
    for (let i = 0; i < 4; i++) {
      results.push(
        await producer.transact(
          [
            { topic: NORMAL, tag: 'outbox-lean', body: { lean: i } },
            { topic: TX_TOPIC, body: { lean: i } },
          ],
          async (m, c) => {
            await m.query(sql('INSERT INTO test_order (id) VALUES (?)'), [c.txId]);
          },
        ),
      );
    }
    const ids = results.flatMap((r) => r.eventIds);
    expect(await countByStatus(ds, ids, 'NEW')).toBe(ids.length);
    const leanSend = jest.spyOn(LeanGateway.prototype, 'send');
    const leanHalf = jest.spyOn(LeanGateway.prototype, 'sendHalf');
    // The public option alone (no test gateway): the relay builds the lean transport itself.
    const relay = new OutboxRelay({
      endpoints: ENDPOINTS,
      dataSource: ds,
      topics: [NORMAL, TX_TOPIC],
      transactionTopics: [TX_TOPIC],
      pollIntervalMs: 100,
      startTimeoutMs: 30_000,
      transport: 'lean',
    });
    relays.push(relay);
    await relay.start();
    await waitFor(async () => (await countByStatus(ds, ids, 'SENT')) === ids.length, {
      description: 'all rows SENT by the lean relay',
    });
    await waitFor(() => ids.every((id) => seen(normal, id) + seen(tx, id) >= 1), {
      description: 'all events delivered',
    });
    expect(relay.stats).toMatchObject({ sent: ids.length, failed: 0, dead: 0 });
    const msg = normal.withProperty('EVENT_ID', results[1]!.eventIds[0]!)[0]!;
    expect(msg).toMatchObject({ tag: 'outbox-lean', body: '{"lean":1}' });
    expect(msg.properties.TX_ID).toBe(results[1]!.txId);
    expect(tx.withProperty('EVENT_ID', results[1]!.eventIds[1]!)[0]!.properties.TX_ID).toBe(results[1]!.txId);
    // Sent by the lean transport: one plain send per normal event, one half message per TRANSACTION one.
    expect(leanSend.mock.calls.filter(([m]) => m.topic === NORMAL)).toHaveLength(results.length);
    expect(leanHalf.mock.calls.filter(([m]) => m.topic === TX_TOPIC)).toHaveLength(results.length);
    leanSend.mockRestore();
    leanHalf.mockRestore();
  });

  it('parallel relays take disjoint rows; a relay killed mid-batch loses its lease and another delivers, duplicates only with the same eventId', async () => {
    await Promise.all(relays.splice(0).map((r) => r.shutdown()));
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await producer.transact({ topic: NORMAL, body: { lease: i } }, async () => undefined);
      ids.push(...r.eventIds);
    }
    // Relay A claims a batch, then hangs in its sends (a process stuck or killed mid-batch).
    let release!: () => void;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    const a = startRelay(
      ds,
      { topics: [NORMAL], batchSize: 8, leaseMs: 2000, relayId: 'relay-A' },
      {
        beforeSend: () => stuck,
      },
    );
    await a.relay.start();
    await waitFor(() => a.relay.stats.claimed >= 8, { description: 'relay A holds a batch' });
    const b = startRelay(ds, { topics: [NORMAL], batchSize: 3, leaseMs: 30_000, relayId: 'relay-B' });
    const c = startRelay(ds, { topics: [NORMAL], batchSize: 3, leaseMs: 30_000, relayId: 'relay-C' });
    await Promise.all([b.relay.start(), c.relay.start()]);
    await waitFor(async () => (await countByStatus(ds, ids, 'SENT')) === ids.length, {
      timeoutMs: 60_000,
      description: 'every row SENT after relay A lease expired',
    });
    // B and C never sent the same row: SKIP LOCKED + lease gave them disjoint rows.
    const mine = (list: string[]) => list.filter((id) => ids.includes(id));
    const overlap = mine(b.sentEventIds).filter((id) => mine(c.sentEventIds).includes(id));
    expect(overlap).toEqual([]);
    expect(new Set([...mine(b.sentEventIds), ...mine(c.sentEventIds)]).size).toBe(ids.length);
    // Relay A wakes up and sends its stale batch: duplicates, each with an eventId already delivered.
    release();
    await waitFor(() => mine(a.sentEventIds).length >= 8, { description: 'relay A finished its batch' });
    await waitFor(() => ids.every((id) => seen(normal, id) >= 1), { description: 'all delivered' });
    const delivered = normal.received.filter((m) => ids.includes(m.properties.EVENT_ID ?? ''));
    expect(new Set(delivered.map((m) => m.properties.EVENT_ID)).size).toBe(ids.length);
    expect(delivered.every((m) => ids.includes(m.keys[0]!))).toBe(true);
    expect(await countByStatus(ds, ids, 'SENT')).toBe(ids.length);
  });

  it('a poison event is retried with backoff and ends DEAD with its last error, counted, never SENT; replayable', async () => {
    await Promise.all(relays.splice(0).map((r) => r.shutdown()));
    const eventId = uuidv7();
    // The proxy refuses a body over its maxMessageSize (4 MiB): a row that can never be delivered.
    const topic = NORMAL;
    await new TypeOrmOutboxStore(ds).insertEvents(ds.manager, [
      {
        eventId,
        txId: uuidv7(),
        topic,
        keys: [eventId],
        properties: { EVENT_ID: eventId },
        body: Buffer.alloc(4 * 1024 * 1024 + 1024, 0x61),
        status: 'NEW',
      },
    ]);
    const p = startRelay(ds, {
      topics: [NORMAL],
      maxAttempts: 3,
      backoff: { baseMs: 50, maxDelayMs: 200, jitterMs: 20 },
    });
    await p.relay.start();
    await waitFor(async () => (await outboxRow(ds, eventId))?.status === 'DEAD', {
      timeoutMs: 60_000,
      description: 'poison event DEAD',
    });
    const row = (await outboxRow(ds, eventId))!;
    expect(row.attempts).toBe(3);
    expect(row.last_error).toMatch(/\S/);
    expect(p.relay.stats.dead).toBe(1);
    expect(p.relay.stats.failed).toBe(2);
    expect(p.sentEventIds).not.toContain(eventId);
    expect(await p.relay.replayDead([eventId])).toBe(1);
    expect((await outboxRow(ds, eventId))!.status).not.toBe('SENT');
    await p.relay.shutdown();
    await ds.query(sql('DELETE FROM outbox_event WHERE event_id = ?'), [eventId]);
  });
});
