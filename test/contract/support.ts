import type { DataSource, EntityManager } from 'typeorm';
import { uuidv7 } from '../../src';
import type { NewOutboxEvent } from '../../src/store/ports';
import { TEST_DATABASE, p, ps } from '../helpers/db';
import { waitFor } from '../helpers/env';

export { TEST_DATABASE, p, ps };

const names = new Set<string>();

/**
 * A name no other test (or run) uses: rows are told apart by topic, group or aggregate. Every
 * name is remembered, and cleanUp deletes the rows that carry one.
 */
export function unique(prefix: string): string {
  const name = `${prefix}_${uuidv7().slice(-12)}`;
  names.add(name);
  return name;
}

/** Deletes the rows this file wrote (by the topics and groups unique() gave it): call in afterAll. */
export async function cleanUp(ds: DataSource): Promise<void> {
  const list = [...names];
  if (list.length === 0) return;
  const where = (column: string) => `${column} IN (${ps(list.length)})`;
  await ds.query(`DELETE FROM outbox_event WHERE ${where('topic')}`, list);
  await ds.query(`DELETE FROM tx_record WHERE ${where('producer_group')}`, list);
  for (const table of ['consumed_event', 'aggregate_cursor', 'test_consumer_effect'])
    await ds.query(`DELETE FROM ${table} WHERE ${where('consumer_group')}`, list);
  names.clear();
}

/** The server-side id of the connection a manager's transaction runs on. */
export async function sessionId(manager: EntityManager): Promise<number> {
  const rows: Array<{ id: string | number }> = await manager.query(
    TEST_DATABASE === 'postgres' ? 'SELECT pg_backend_pid() AS id' : 'SELECT CONNECTION_ID() AS id',
  );
  return Number(rows[0]!.id);
}

/** Waits until the session is blocked on a row lock held by another transaction. */
export async function waitUntilLockWaiting(ds: DataSource, session: number): Promise<void> {
  const sql =
    TEST_DATABASE === 'postgres'
      ? `SELECT 1 AS waiting FROM pg_stat_activity WHERE pid = ${p(1)} AND wait_event_type = 'Lock'`
      : `SELECT 1 AS waiting FROM information_schema.INNODB_TRX
         WHERE trx_mysql_thread_id = ${p(1)} AND trx_state = 'LOCK WAIT'`;
  await waitFor(async () => (await ds.query(sql, [session])).length > 0, {
    description: `session ${session} waiting on a row lock`,
  });
}

/** An event row as the producer writes it. */
export function newEvent(
  txId: string,
  topic: string,
  status: 'NEW' | 'IN_FLIGHT',
  extra: Partial<NewOutboxEvent> = {},
): NewOutboxEvent {
  const eventId = uuidv7();
  return {
    eventId,
    txId,
    topic,
    keys: [eventId],
    properties: { TX_ID: txId, EVENT_ID: eventId },
    body: Buffer.from(JSON.stringify({ eventId })),
    status,
    ...extra,
  };
}

/** Inserts a tx_record row directly (the fence's store is not under test here). */
export async function insertTxRecord(
  ds: DataSource,
  txId: string,
  status: 'COMMITTED' | 'ROLLED_BACK',
  producerGroup: string,
): Promise<void> {
  await ds.query(
    `INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count) VALUES (${ps(6)})`,
    [txId, status, 'PRODUCER', producerGroup, 'contract', 1],
  );
}

/** Moves an outbox row's schedule into the past (as if it had waited `ms`), without sleeping. */
export async function ageRow(ds: DataSource, eventId: string, ms: number): Promise<void> {
  const past =
    TEST_DATABASE === 'postgres'
      ? `CURRENT_TIMESTAMP(3) - ${p(1)}::double precision * interval '1 millisecond'`
      : `CURRENT_TIMESTAMP(3) - INTERVAL ${p(1)} MICROSECOND`;
  await ds.query(`UPDATE outbox_event SET next_attempt_at = ${past} WHERE event_id = ${p(2)}`, [
    TEST_DATABASE === 'postgres' ? ms : ms * 1000,
    eventId,
  ]);
}

export async function outboxRow(
  ds: DataSource,
  eventId: string,
): Promise<
  { status: string; attempts: number; lease_owner: string | null; last_error: string | null } | undefined
> {
  const rows = await ds.query(
    `SELECT status, attempts, lease_owner, last_error FROM outbox_event WHERE event_id = ${p(1)}`,
    [eventId],
  );
  return rows[0] ? { ...rows[0], attempts: Number(rows[0].attempts) } : undefined;
}
