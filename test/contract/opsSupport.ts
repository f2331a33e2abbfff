import type { DataSource } from 'typeorm';
import { CreateOutboxEventArchive1764634100000, uuidv7 } from '../../src';
import { databaseOfDataSource, p, ps } from '../helpers/db';

/**
 * Rows for the operational contract tests (retention, status, reconciler, CLI), written through
 * the SDK's entities so the same code runs on every database. Timestamps are given as ages on the
 * process clock (the database runs on this host; the tests use ages of minutes or days).
 */
export const MIN_MS = 60_000;
export const DAY_MS = 24 * 3600 * 1000;

export const ago = (ms: number) => new Date(Date.now() - ms);

/** A short random tag that keeps one test's rows apart from every other's. */
export const runTag = () => Math.random().toString(36).slice(2, 8);

// The topics and consumer groups this file's rows carry: cleanUpOps deletes them.
const topics = new Set<string>();
const groups = new Set<string>();

/**
 * Deletes the rows this file wrote (outbox_event, outbox_event_archive and tx_record by topic,
 * consumed_event by group; rows a reconciler republished carry the same topic): call in afterAll.
 */
export async function cleanUpOps(ds: DataSource): Promise<void> {
  const db = databaseOfDataSource(ds);
  const t = [...topics];
  const g = [...groups];
  if (t.length > 0) {
    for (const table of ['outbox_event', 'tx_record']) {
      await ds.query(`DELETE FROM ${table} WHERE topic IN (${ps(t.length, 1, db)})`, t);
    }
    const qr = ds.createQueryRunner();
    try {
      if (await qr.hasTable('outbox_event_archive')) {
        await ds.query(`DELETE FROM outbox_event_archive WHERE topic IN (${ps(t.length, 1, db)})`, t);
      }
    } finally {
      await qr.release();
    }
  }
  if (g.length > 0)
    await ds.query(`DELETE FROM consumed_event WHERE consumer_group IN (${ps(g.length, 1, db)})`, g);
  topics.clear();
  groups.clear();
}

/** Remembers a topic whose rows something else writes (a reconciler's republished events). */
export function ownTopic(topic: string): string {
  topics.add(topic);
  return topic;
}

export async function ensureArchiveTable(ds: DataSource): Promise<void> {
  const qr = ds.createQueryRunner();
  await qr.connect();
  try {
    if (!(await qr.hasTable('outbox_event_archive')))
      await new CreateOutboxEventArchive1764634100000().up(qr);
  } finally {
    await qr.release();
  }
}

export async function insertTx(
  ds: DataSource,
  row: {
    topic: string;
    ageMs: number;
    status?: 'COMMITTED' | 'ROLLED_BACK';
    resolvedBy?: 'PRODUCER' | 'CHECK_BACK';
    group?: string;
  },
): Promise<string> {
  const txId = uuidv7();
  topics.add(row.topic);
  await ds.getRepository('TxRecord').insert({
    txId,
    status: row.status ?? 'COMMITTED',
    resolvedBy: row.resolvedBy ?? 'PRODUCER',
    producerGroup: row.group ?? 'ct_ops',
    topic: row.topic,
    eventCount: 1,
    createdAt: ago(row.ageMs),
  });
  return txId;
}

export interface OutboxRowSpec {
  txId?: string;
  topic: string;
  status: 'NEW' | 'IN_FLIGHT' | 'SENT' | 'DEAD';
  /** occurred_at and next_attempt_at (and published_at of a SENT row) this long ago. */
  ageMs: number;
  aggregate?: { type: string; id: string; version: number; eventType: string };
  lastError?: string;
  attempts?: number;
  payload?: Buffer;
}

export async function insertOutbox(ds: DataSource, row: OutboxRowSpec): Promise<string> {
  const eventId = uuidv7();
  topics.add(row.topic);
  const at = ago(row.ageMs);
  await ds.getRepository('OutboxEvent').insert({
    eventId,
    txId: row.txId ?? uuidv7(),
    topic: row.topic,
    tag: null,
    keys: '[]',
    properties: '{}',
    aggregateType: row.aggregate?.type ?? null,
    aggregateId: row.aggregate?.id ?? null,
    aggregateVersion: row.aggregate?.version ?? null,
    eventType: row.aggregate?.eventType ?? null,
    eventVersion: row.aggregate ? 1 : null,
    payload: row.payload ?? Buffer.from('x'),
    occurredAt: at,
    traceId: null,
    status: row.status,
    attempts: row.attempts ?? 0,
    nextAttemptAt: at,
    leaseUntil: null,
    leaseOwner: null,
    publishedAt: row.status === 'SENT' ? at : null,
    lastError: row.lastError ?? null,
  });
  return eventId;
}

export async function insertConsumed(
  ds: DataSource,
  row: { group: string; ageMs: number; outcome?: 'APPLIED' | 'STALE' | 'IGNORED' },
): Promise<string> {
  const eventId = uuidv7();
  groups.add(row.group);
  await ds.getRepository('ConsumedEvent').insert({
    consumerGroup: row.group,
    eventId,
    eventType: 'Test',
    aggregateType: 'Test',
    aggregateId: 'a-1',
    aggregateVersion: '1',
    outcome: row.outcome ?? 'APPLIED',
    consumedAt: ago(row.ageMs),
  });
  return eventId;
}

/** Which of these keys `table` holds (column is its key column). */
export async function present(
  ds: DataSource,
  table: 'outbox_event' | 'outbox_event_archive' | 'tx_record' | 'consumed_event',
  column: 'event_id' | 'tx_id',
  ids: readonly string[],
): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows: Array<{ id: string }> = await ds.query(
    `SELECT ${column} AS id FROM ${table} WHERE ${column} IN (${ps(ids.length, 1, databaseOfDataSource(ds))})`,
    [...ids],
  );
  return rows.map((r) => r.id.trim()).sort();
}

/** One outbox row's status (undefined when absent). */
export async function statusOf(ds: DataSource, eventId: string): Promise<string | undefined> {
  const rows: Array<{ status: string }> = await ds.query(
    `SELECT status FROM outbox_event WHERE event_id = ${p(1, databaseOfDataSource(ds))}`,
    [eventId],
  );
  return rows[0]?.status;
}
