import type { DataSource } from 'typeorm';
import {
  FactReconciler,
  InvalidMessageError,
  InvalidOptionError,
  createEnvelope,
  uuidv7,
  type Fact,
  type FactPageRequest,
  type OutboxRelay,
  type ReconcileProgress,
  type TransactionalProducer,
} from '../../src';
import { Collector } from '../helpers/collector';
import { TEST_DATABASE, ahead, ensureSchema, openDataSource, qid, sql } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';
import { makeRelay } from '../helpers/relay';

const TOPIC = 'rmqtx_normal_6';
/** Rows of this topic are never served by a relay here: they stay NEW or DEAD. */
const IDLE_TOPIC = 'rmqtx_tx_13';
const GROUP = 'it_reconcile';
const RUN = Math.random().toString(36).slice(2, 8);

describe(`FactReconciler against the database (${TEST_DATABASE}) and the real broker`, () => {
  let ds: DataSource;
  let producer: TransactionalProducer;
  let relay: OutboxRelay;
  let collector: Collector;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    await ds.query(
      TEST_DATABASE === 'postgres'
        ? `CREATE TABLE IF NOT EXISTS it_reco_order (
             id VARCHAR(64) NOT NULL PRIMARY KEY,
             run VARCHAR(16) NOT NULL,
             version INT NOT NULL,
             created_at TIMESTAMPTZ(3) NOT NULL DEFAULT now()
           )`
        : `CREATE TABLE IF NOT EXISTS it_reco_order (
             id VARCHAR(64) NOT NULL PRIMARY KEY,
             run VARCHAR(16) NOT NULL,
             version INT NOT NULL,
             created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
             KEY idx_it_reco_order_run (run, id)
           )`,
    );
    if (TEST_DATABASE === 'postgres')
      await ds.query('CREATE INDEX IF NOT EXISTS idx_it_reco_order_run ON it_reco_order (run, id)');
    collector = await new Collector(TOPIC).start();
    producer = makeProducer(ds, { topics: [TOPIC], producerGroup: GROUP, delivery: 'outbox' });
    await producer.start();
    relay = makeRelay(ds, { topics: [TOPIC] }).relay;
    await relay.start();
  });

  afterAll(async () => {
    await relay?.shutdown();
    await producer?.shutdown();
    await collector?.stop();
    await ds?.destroy();
  });

  /** Orders of one scenario: a business row each, keyset-paged by id. */
  function scenario(name: string) {
    const aggregateType = `ItReco${name}${RUN}`;
    const run = `${name.slice(0, 6)}${RUN}`;
    const pagesAsked: Array<FactPageRequest<string>> = [];
    const facts = async (req: FactPageRequest<string>) => {
      pagesAsked.push(req);
      const rows: Array<{ id: string; version: number }> = await req.dataSource.query(
        sql(`SELECT id, version FROM it_reco_order WHERE run = ? AND id > ? ORDER BY id LIMIT ${req.limit}`),
        [run, req.cursor ?? ''],
      );
      return {
        facts: rows.map((r) => ({
          aggregateType,
          aggregateId: r.id,
          eventType: 'OrderPlaced',
          aggregateVersion: Number(r.version),
        })),
        nextCursor: rows.length === req.limit ? rows[rows.length - 1]!.id : null,
      };
    };
    const buildEvent = (fact: Fact) => ({
      topic: TOPIC,
      event: createEnvelope({
        eventType: fact.eventType,
        eventVersion: 1,
        aggregateType: fact.aggregateType,
        aggregateId: fact.aggregateId,
        aggregateVersion: fact.aggregateVersion ?? 1,
        data: { reconciled: true },
      }),
    });
    const order = async (suffix: string, version = 1) => {
      const id = `${run}-${suffix}`;
      await ds.query(sql('INSERT INTO it_reco_order (id, run, version) VALUES (?, ?, ?)'), [
        id,
        run,
        version,
      ]);
      return id;
    };
    /** An outbox row written directly (status as given), on a topic no relay serves. */
    const row = async (aggregateId: string, version: number, status: string) => {
      const eventId = uuidv7();
      await ds.query(
        sql(`INSERT INTO outbox_event (event_id, tx_id, topic, ${qid('keys')}, properties, aggregate_type, aggregate_id,
           aggregate_version, event_type, event_version, payload, occurred_at, status, attempts, next_attempt_at)
         VALUES (?, ?, ?, '[]', '{}', ?, ?, ?, 'OrderPlaced', 1, 'x', CURRENT_TIMESTAMP(3), ?, 0,
                 ${ahead(1, 'DAY')})`),
        [eventId, uuidv7(), IDLE_TOPIC, aggregateType, aggregateId, version, status],
      );
      return eventId;
    };
    const outboxOf = async (aggregateId: string) =>
      (await ds.query(
        sql(`SELECT event_id, tx_id, status, aggregate_version, topic FROM outbox_event
         WHERE aggregate_type = ? AND aggregate_id = ? ORDER BY aggregate_version`),
        [aggregateType, aggregateId],
      )) as Array<{
        event_id: string;
        tx_id: string;
        status: string;
        aggregate_version: string;
        topic: string;
      }>;
    return { aggregateType, run, facts, buildEvent, order, row, outboxOf, pagesAsked };
  }

  it('reports ok, pending, dead and missing facts, writes nothing in a dry run, then republishes only the missing ones through the relay', async () => {
    const s = scenario('Main');
    // A: the normal path, producer + relay: SENT.
    const a = `${s.run}-a`;
    const placed = await producer.transact(
      {
        topic: TOPIC,
        event: createEnvelope({
          eventType: 'OrderPlaced',
          eventVersion: 1,
          aggregateType: s.aggregateType,
          aggregateId: a,
          aggregateVersion: 1,
          data: {},
        }),
      },
      async (m) => {
        await m.query(sql('INSERT INTO it_reco_order (id, run, version) VALUES (?, ?, 1)'), [a, s.run]);
      },
    );
    await waitFor(async () => (await s.outboxOf(a))[0]?.status === 'SENT', {
      description: 'the relay delivers the normal event',
    });
    const b = await s.order('b');
    await s.row(b, 1, 'NEW'); // pending delivery
    const c = await s.order('c');
    const deadId = await s.row(c, 1, 'DEAD');
    const d = await s.order('d'); // no event at all
    const e = await s.order('e');
    const f = await s.order('f', 2); // version 2 is the fact; only version 1 has an event
    await s.row(f, 1, 'NEW');

    const progress: ReconcileProgress[] = [];
    const reconciler = new FactReconciler({
      dataSource: ds,
      facts: s.facts,
      buildEvent: s.buildEvent,
      producerGroup: GROUP,
      topics: [TOPIC],
      batchSize: 2,
    });
    const dry = await reconciler.run({ onProgress: (p) => progress.push(p) });
    expect(dry.dryRun).toBe(true);
    expect(dry.checked).toBe(6);
    expect(dry.ok).toBe(1);
    expect(dry.pendingDelivery).toBe(1);
    expect(dry.dead).toBe(1);
    expect(dry.deadEventIds).toEqual([deadId]);
    expect(dry.missingCount).toBe(3);
    expect(dry.missing.map((m) => [m.fact.aggregateId, m.outcome]).sort()).toEqual([
      [d, 'reported'],
      [e, 'reported'],
      [f, 'reported'],
    ]);
    expect(dry.republished).toBe(0);
    for (const id of [d, e]) expect(await s.outboxOf(id)).toHaveLength(0);
    expect(await s.outboxOf(f)).toHaveLength(1);
    // Keyset pages of 2: the cursor is the last id of the previous page; one progress call per page.
    expect(dry.pages).toBe(4);
    expect(s.pagesAsked.map((p) => p.cursor)).toEqual([undefined, b, d, f]);
    expect(progress.map((p) => p.checked)).toEqual([2, 4, 6, 6]);

    const real = await reconciler.run({ dryRun: false });
    expect(real.dryRun).toBe(false);
    expect(real.missingCount).toBe(3);
    expect(real.republished).toBe(3);
    expect(real.refused).toBe(0);
    const republished = real.missing.map((m) => m.eventId!);
    expect(new Set(republished).size).toBe(3);
    for (const m of real.missing) {
      const rows = await s.outboxOf(m.fact.aggregateId);
      const mine = rows.find((r) => r.event_id === m.eventId)!;
      expect(mine).toBeDefined();
      expect(Number(mine.aggregate_version)).toBe(m.fact.aggregateVersion);
      // Its fence row: a lost commit is answered COMMIT by the group's producers.
      const tx = await ds.query(sql('SELECT status, producer_group FROM tx_record WHERE tx_id = ?'), [
        mine.tx_id,
      ]);
      expect(tx).toEqual([{ status: 'COMMITTED', producer_group: GROUP }]);
    }
    // Delivered by the relay, not by the reconciler; the collector sees exactly the republished ids.
    await waitFor(() => republished.every((id) => collector.withProperty('EVENT_ID', id).length > 0), {
      timeoutMs: 60_000,
      description: 'the relay delivers the republished events',
    });
    const seenForRun = new Set(
      collector.received
        .filter((m) => m.properties.AGGREGATE_ID?.startsWith(`Main${RUN}`) || false)
        .map((m) => m.properties.EVENT_ID),
    );
    expect(seenForRun).toEqual(new Set([placed.eventIds[0], ...republished]));
    await waitFor(async () => (await s.outboxOf(d))[0]?.status === 'SENT', { description: 'marked SENT' });

    // Nothing is missing any more; a second real run writes nothing.
    const again = await reconciler.run({ dryRun: false });
    expect(again.missingCount).toBe(0);
    expect(again.republished).toBe(0);
    expect(again.ok).toBe(4);
    expect(again.pendingDelivery).toBe(1);
    expect(again.dead).toBe(1);
  });

  it('two reconcilers republishing at once write one row per missing fact (the unique key refuses the other)', async () => {
    const s = scenario('Race');
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await s.order(`r${i}`));
    // Both reconcilers must have found the first page missing before either writes it.
    const arrived = new Set<number>();
    let release!: () => void;
    const bothArrived = new Promise<void>((resolve) => (release = resolve));
    const make = (n: number) =>
      new FactReconciler({
        dataSource: ds,
        facts: s.facts,
        buildEvent: async (fact) => {
          arrived.add(n);
          if (arrived.size === 2) release();
          await bothArrived;
          return s.buildEvent(fact);
        },
        producerGroup: GROUP,
        topics: [TOPIC],
        republish: true,
        batchSize: 3,
      });
    const [r1, r2] = await Promise.all([make(1).run(), make(2).run()]);
    expect(r1.republished + r2.republished).toBe(6);
    expect(r1.refused + r2.refused).toBe(r1.missingCount + r2.missingCount - 6);
    expect(r1.refused + r2.refused).toBeGreaterThanOrEqual(3);
    for (const id of ids) {
      const rows = await s.outboxOf(id);
      expect(rows).toHaveLength(1);
      // A refused write leaves no orphan fence row behind.
      const fences = await ds.query(sql('SELECT COUNT(*) AS n FROM tx_record WHERE tx_id = ?'), [
        rows[0]!.tx_id,
      ]);
      expect(Number(fences[0].n)).toBe(1);
    }
    await waitFor(
      async () => (await Promise.all(ids.map(s.outboxOf))).every((r) => r[0]?.status === 'SENT'),
      {
        timeoutMs: 60_000,
        description: 'the relay delivers them',
      },
    );
  });

  it('a built event that does not match its fact is refused before anything is written', async () => {
    const s = scenario('Bad');
    const id = await s.order('x', 3);
    const wrongVersion = new FactReconciler({
      dataSource: ds,
      facts: s.facts,
      buildEvent: (fact) => s.buildEvent({ ...fact, aggregateVersion: 4 }),
      producerGroup: GROUP,
      topics: [TOPIC],
      republish: true,
    });
    await expect(wrongVersion.run()).rejects.toThrow(InvalidMessageError);
    await expect(wrongVersion.run()).rejects.toThrow(
      /aggregateVersion: got 4; expected the fact's aggregateVersion \(3\)/,
    );
    const bodyEvent = new FactReconciler({
      dataSource: ds,
      facts: s.facts,
      buildEvent: () => ({ topic: TOPIC, body: 'x' }) as never,
      producerGroup: GROUP,
      topics: [TOPIC],
      republish: true,
    });
    await expect(bodyEvent.run()).rejects.toThrow(/an envelope event/);
    expect(await s.outboxOf(id)).toHaveLength(0);
    // A source that hands back the same cursor forever is stopped.
    const looping = new FactReconciler({
      dataSource: ds,
      facts: async () => ({
        facts: [{ aggregateType: 'X', aggregateId: 'y', eventType: 'Z' }],
        nextCursor: 7,
      }),
    });
    await expect(looping.run()).rejects.toThrow(/a cursor not returned before/);
    const malformed = new FactReconciler({
      dataSource: ds,
      facts: async () => ({ facts: [{ aggregateType: 'X', aggregateId: '', eventType: 'Z' }] }),
    });
    await expect(malformed.run()).rejects.toThrow(/facts page 1.facts\[0\].aggregateId: got ""/);
  });

  it('validates its options at construction', () => {
    const facts = async () => ({ facts: [] });
    expect(() => new FactReconciler({ dataSource: ds, facts, republish: true })).toThrow(
      /buildEvent: got undefined; expected a function when republish is true/,
    );
    expect(() => new FactReconciler({ dataSource: ds, facts, batchSize: 0 })).toThrow(InvalidOptionError);
    expect(
      () => new FactReconciler({ dataSource: ds, facts, buildEvent: () => ({}) as never, topics: [TOPIC] }),
    ).toThrow(/producerGroup/);
    expect(() => new FactReconciler({ dataSource: ds, facts: 'SELECT 1' as never })).toThrow(
      /facts: got "SELECT 1"/,
    );
    expect(
      () => new FactReconciler({ dataSource: ds, facts, since: new Date(2), until: new Date(1) }),
    ).toThrow(/until/);
    const noBuilder = new FactReconciler({ dataSource: ds, facts });
    return expect(noBuilder.run({ dryRun: false })).rejects.toThrow(/no buildEvent/);
  });
});
