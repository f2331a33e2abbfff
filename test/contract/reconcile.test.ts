import type { DataSource } from 'typeorm';
import { FactReconciler, createEnvelope, type Fact } from '../../src';
import { TEST_DATABASE, databaseOfDataSource, ensureSchema, openDataSource, p } from '../helpers/db';
import {
  DAY_MS,
  ensureArchiveTable,
  insertOutbox,
  runTag,
  statusOf,
  cleanUpOps,
  ownTopic,
} from './opsSupport';
import { Retention } from '../../src';

/**
 * FactReconciler's outbox side on the database ROCKETMQ_TX_DB_URL names: live and archived
 * lookups, and the republish write (rows refused by a unique key skipped, not an error).
 */
describe(`FactReconciler facts (${TEST_DATABASE})`, () => {
  let ds: DataSource;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
    await ensureArchiveTable(ds);
  });
  afterAll(async () => {
    if (ds) await cleanUpOps(ds);
    await ds?.destroy();
  });

  it('finds live and archived events, reports pending, DEAD and missing facts, and republishes the missing ones once', async () => {
    const tag = runTag();
    const topic = ownTopic(`ct_rec_${tag}`);
    const type = `CtReco${tag}`;
    const fact = (id: string, version = 1): Fact => ({
      aggregateType: type,
      aggregateId: id,
      eventType: 'OrderPlaced',
      aggregateVersion: version,
    });
    const row = (id: string, status: 'NEW' | 'SENT' | 'DEAD', ageMs = 0) =>
      insertOutbox(ds, {
        topic,
        status,
        ageMs,
        aggregate: { type, id, version: 1, eventType: 'OrderPlaced' },
      });
    await row('sent', 'SENT');
    await row('archived', 'SENT', 30 * DAY_MS);
    // Moves the 30-day-old row (and any other old SENT row) to the archive.
    await new Retention({ dataSource: ds, olderThanMs: 20 * DAY_MS }).archive();
    await row('pending', 'NEW');
    const deadId = await row('dead', 'DEAD');
    const facts = [
      fact('sent'),
      fact('archived'),
      fact('pending'),
      fact('dead'),
      fact('missing1'),
      fact('missing2'),
    ];

    const reconciler = new FactReconciler({
      dataSource: ds,
      facts: async (req) => {
        const start = req.cursor === undefined ? 0 : Number(req.cursor);
        const page = facts.slice(start, start + req.limit);
        return {
          facts: page,
          nextCursor: start + req.limit < facts.length ? String(start + req.limit) : null,
        };
      },
      buildEvent: (f) => ({
        topic,
        event: createEnvelope({
          eventType: f.eventType,
          eventVersion: 1,
          aggregateType: f.aggregateType,
          aggregateId: f.aggregateId,
          aggregateVersion: f.aggregateVersion ?? 1,
          data: { reconciled: true },
        }),
      }),
      producerGroup: `ct_rec_${tag}`,
      topics: [topic],
      batchSize: 4,
    });
    const dry = await reconciler.run();
    expect(dry).toMatchObject({
      dryRun: true,
      checked: 6,
      ok: 2,
      pendingDelivery: 1,
      dead: 1,
      missingCount: 2,
    });
    expect(dry.deadEventIds).toEqual([deadId]);
    expect(dry.missing.map((m) => m.outcome)).toEqual(['reported', 'reported']);

    const wet = await reconciler.run({ dryRun: false });
    expect(wet).toMatchObject({ dryRun: false, republished: 2, refused: 0, missingCount: 2 });
    const written = wet.missing.map((m) => m.eventId!);
    for (const id of written) expect(await statusOf(ds, id)).toBe('NEW');
    // Each republished row has its COMMITTED tx_record (the relay's half message is answered COMMIT).
    const db = databaseOfDataSource(ds);
    const tx: Array<{ status: string; producer_group: string }> = await ds.query(
      `SELECT t.status, t.producer_group FROM tx_record t JOIN outbox_event o ON o.tx_id = t.tx_id
       WHERE o.event_id = ${p(1, db)}`,
      [written[0]],
    );
    expect(tx).toEqual([{ status: 'COMMITTED', producer_group: `ct_rec_${tag}` }]);

    // Now pending, not missing: nothing is written twice.
    const after = await reconciler.run({ dryRun: false });
    expect(after).toMatchObject({ missingCount: 0, pendingDelivery: 3, republished: 0, ok: 2 });
  });

  it('a missing event written meanwhile by someone else is refused by the unique key, not an error, and nothing else is lost', async () => {
    const tag = runTag();
    const topic = ownTopic(`ct_rec2_${tag}`);
    const type = `CtReco2${tag}`;
    let injected = false;
    const reconciler = new FactReconciler({
      dataSource: ds,
      facts: async () => ({
        facts: [
          { aggregateType: type, aggregateId: 'raced', eventType: 'OrderPlaced', aggregateVersion: 1 },
          { aggregateType: type, aggregateId: 'free', eventType: 'OrderPlaced', aggregateVersion: 1 },
        ],
        nextCursor: null,
      }),
      buildEvent: async (f) => {
        // Another writer takes the same aggregate version between the lookup and the write.
        if (f.aggregateId === 'raced' && !injected) {
          injected = true;
          await insertOutbox(ds, {
            topic,
            status: 'NEW',
            ageMs: 0,
            aggregate: { type, id: 'raced', version: 1, eventType: 'OrderPlaced' },
          });
        }
        return {
          topic,
          event: createEnvelope({
            eventType: f.eventType,
            eventVersion: 1,
            aggregateType: f.aggregateType,
            aggregateId: f.aggregateId,
            aggregateVersion: 1,
            data: {},
          }),
        };
      },
      producerGroup: `ct_rec_${tag}`,
      topics: [topic],
    });
    const report = await reconciler.run({ dryRun: false });
    expect(report).toMatchObject({ republished: 1, refused: 1 });
    const free = report.missing.find((m) => m.fact.aggregateId === 'free')!;
    expect(free.outcome).toBe('republished');
    expect(await statusOf(ds, free.eventId!)).toBe('NEW');
    expect(report.missing.find((m) => m.fact.aggregateId === 'raced')!.outcome).toBe('refused');
  });
});
