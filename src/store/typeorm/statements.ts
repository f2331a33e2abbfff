import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { ConsumedRow, CursorKey, NewOutboxEvent } from '../ports';
import { destroyConnection } from './dialect';

/** One SQL statement and its parameters, in the placeholder style of the database it is for. */
export interface Statement {
  readonly sql: string;
  readonly params: readonly unknown[];
}

/**
 * What a statement returned: its rows, how many rows it changed (UPDATE/DELETE/INSERT), and
 * MySQL's insert id (AUTO_INCREMENT, or the argument of LAST_INSERT_ID(expr); 0 otherwise).
 */
export interface StatementResult<Row> {
  rows: Row[];
  affected: number;
  insertId?: number;
}

/**
 * Runs a statement on a DataSource (a pooled connection for that one statement) or inside an
 * EntityManager's transaction. TypeORM's structured result is the one shape both drivers fill:
 * mysql2 reports `affectedRows`, node-postgres `rowCount`.
 */
export async function execute<Row = Record<string, unknown>>(
  target: DataSource | EntityManager,
  statement: Statement,
): Promise<StatementResult<Row>> {
  const manager = 'manager' in target ? target.manager : target;
  const own = manager.queryRunner === undefined;
  const queryRunner = manager.queryRunner ?? manager.connection.createQueryRunner();
  try {
    const result = (await queryRunner.query(statement.sql, [...statement.params], true)) as {
      records?: unknown;
      affected?: number;
      raw?: { insertId?: unknown };
    };
    const insertId = result.raw?.insertId;
    return {
      rows: Array.isArray(result.records) ? (result.records as Row[]) : [],
      affected: typeof result.affected === 'number' ? result.affected : 0,
      ...(typeof insertId === 'number' ? { insertId } : {}),
    };
  } finally {
    if (own) await queryRunner.release();
  }
}

/**
 * An outbox event's column values from event_id to body, in the order of the outbox_event
 * insert column lists (keys and properties as JSON text); every insert of an event row uses it.
 */
export function outboxRowValues(e: NewOutboxEvent): unknown[] {
  return [
    e.eventId,
    e.txId,
    e.topic,
    e.tag ?? null,
    JSON.stringify(e.keys),
    JSON.stringify(e.properties),
    e.aggregateType ?? null,
    e.aggregateId ?? null,
    e.aggregateVersion ?? null,
    e.eventType ?? null,
    e.eventVersion ?? null,
    e.body,
  ];
}

/** The outbox_event statements of one database (see TypeOrmOutboxStore for how they are used). */
export interface OutboxSql {
  /** One multi-row INSERT of the events (occurred_at defaults to the database clock). */
  insertEvents(events: readonly NewOutboxEvent[]): Statement;
  /** The duplicate key of a DUPLICATE_KEY error, for the error message; undefined if not told. */
  duplicateKey(err: unknown): string | undefined;
  /** IN_FLIGHT or NEW rows of `eventIds` become SENT. */
  markConfirmed(eventIds: readonly string[]): Statement;
  /**
   * Due NEW rows of `topics`, oldest first, locked with FOR UPDATE SKIP LOCKED: ClaimedRow rows
   * (the whole row, so the claim needs no second read; leasing changes none of its columns).
   */
  selectDue(topics: readonly string[], limit: number): Statement;
  /** Leases claimed NEW rows to `owner` (lease_until = next_attempt_at = now + leaseMs). */
  leaseDue(eventIds: readonly string[], owner: string, leaseMs: number): Statement;
  /**
   * IN_FLIGHT rows older than `horizonMs`, not leased, of `topics`, whose transaction committed
   * (of `producerGroup` only, when given), locked with FOR UPDATE SKIP LOCKED: ClaimedRow rows.
   */
  selectUnconfirmed(options: {
    horizonMs: number;
    topics: readonly string[];
    limit: number;
    producerGroup?: string;
  }): Statement;
  /** Leases claimed IN_FLIGHT rows to `owner` (lease_until = now + leaseMs; they stay IN_FLIGHT). */
  leaseUnconfirmed(eventIds: readonly string[], owner: string, leaseMs: number): Statement;
  releaseUnconfirmed(eventId: string, owner: string, error: string, retryInMs: number): Statement;
  markSent(eventId: string): Statement;
  /** markSent for many rows in one statement (the relay's claimed batch). */
  markSentMany(eventIds: readonly string[]): Statement;
  markFailed(eventId: string, owner: string, error: string, retryInMs: number, dead: boolean): Statement;
  /** IN_FLIGHT rows of `eventIds` become NEW (due now), with the reason in last_error. */
  promote(eventIds: readonly string[]): Statement;
  /** DEAD rows (all, or those of `eventIds`) back to NEW, attempts reset; its affected count is the answer. */
  replayDead(eventIds?: readonly string[]): Statement;
}

/** A row of OutboxSql.selectDue and OutboxSql.selectUnconfirmed. */
export interface ClaimedRow {
  event_id: string;
  tx_id: string;
  topic: string;
  tag: string | null;
  keys: string;
  properties: string;
  payload: Buffer;
  aggregate_id: string | null;
  attempts: number;
}

/** The consumed_event and aggregate_cursor statements of one database (see TypeOrmInboxStore). */
/** A consumed_event row's values, in the order of the insert column lists, outcome APPLIED. */
export function consumedRowValues(row: ConsumedRow): unknown[] {
  return [
    row.consumerGroup,
    row.eventId,
    row.eventType,
    row.aggregateType,
    row.aggregateId,
    row.aggregateVersion,
    'APPLIED',
  ];
}

export interface InboxSql {
  /**
   * Whether the consumer's transaction pins READ COMMITTED. MySQL/MariaDB: no (the server's
   * level, the handler's business statements run in it too); PostgreSQL: yes (under a stricter
   * server default, a concurrent duplicate would fail with 40001 instead of being skipped).
   */
  readonly isolation: 'READ COMMITTED' | undefined;
  /**
   * Inserts the dedupe row (outcome APPLIED). A duplicate either fails with a DUPLICATE_KEY error
   * (MySQL/MariaDB, whose transaction stays usable) or is skipped, `inserted(result)` false
   * (PostgreSQL: a failed statement would abort the whole transaction).
   */
  insertConsumed(row: ConsumedRow): Statement;
  inserted(result: StatementResult<Record<string, unknown>>): boolean;
  markOutcome(row: ConsumedRow, outcome: 'STALE' | 'IGNORED'): Statement;
  /**
   * Locks the cursor row exclusively (creating it at 0) in one statement; `cursorVersion(result)`
   * reads the row's `last_version` from that statement's result.
   */
  lockCursor(key: CursorKey): Statement;
  cursorVersion(result: StatementResult<Record<string, unknown>>): number;
  advanceCursor(key: CursorKey, version: number, skipped: number): Statement;
  /**
   * claimVersion in one statement, where the dialect has one: the version the cursor held before
   * is read with cursorVersion(result). Absent: lockCursor, then advanceCursor if it moves.
   */
  claimVersion?(key: CursorKey, version: number, acceptGap: boolean): Statement;
}

/**
 * Ends a transaction without committing it. TypeORM's rollbackTransaction can fail before it
 * sends anything (a throwing subscriber); a raw ROLLBACK skips subscribers, and if that fails too
 * the connection is destroyed, so it never returns to the pool with the transaction open (the
 * next borrower would commit it). `onFailure` hears each failed step.
 */
export async function abandonTransaction(
  queryRunner: QueryRunner,
  onFailure: (step: 'rollback' | 'raw-rollback', err: unknown) => void = () => undefined,
): Promise<void> {
  if (!queryRunner.isTransactionActive) return;
  try {
    await queryRunner.rollbackTransaction();
    return;
  } catch (err) {
    onFailure('rollback', err);
  }
  try {
    await queryRunner.query('ROLLBACK');
    return;
  } catch (err) {
    onFailure('raw-rollback', err);
  }
  destroyConnection(queryRunner);
}
