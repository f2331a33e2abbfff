import type { EntityManager } from 'typeorm';

export type TxStatus = 'COMMITTED' | 'ROLLED_BACK';

export interface NewTxRecord {
  txId: string;
  producerGroup: string;
  topic: string;
  eventCount: number;
}

/**
 * The check-back's tombstone INSERT (tx_id, 'ROLLED_BACK', resolved_by 'CHECK_BACK'), a primitive
 * of the fence (src/checkback/fence.ts decides what it means):
 * - `INSERTED`: the tombstone is committed; the producer's later insert will fail (fenced).
 * - `EXISTS`: a committed row has this txId (its status needs a fresh read).
 * - `UNDECIDED`: the lock-wait bound expired, a deadlock victim, or any other database error
 *   (the tombstone is not known to be committed).
 */
export type TombstoneOutcome =
  | { kind: 'INSERTED' }
  | { kind: 'EXISTS' }
  | { kind: 'UNDECIDED'; reason: 'LOCK_WAIT_TIMEOUT' | 'DEADLOCK' | 'DATABASE_ERROR'; error: unknown };

/** One tx_record row as a batched read sees it: its final status, and who wrote it. */
export interface TxRecordState {
  status: TxStatus;
  resolvedBy: 'PRODUCER' | 'CHECK_BACK';
}

/**
 * The batched tombstone INSERT (many txIds, one statement, one short transaction): either every
 * row is now committed (`DONE`: each txId has a tombstone this call inserted or a row another
 * transaction committed; fresh reads tell which) or nothing is known (`UNDECIDED`, as for one).
 */
export type TombstonesOutcome =
  | { kind: 'DONE' }
  | { kind: 'UNDECIDED'; reason: 'LOCK_WAIT_TIMEOUT' | 'DEADLOCK' | 'DATABASE_ERROR'; error: unknown };

/** A plain read of a transaction's final status (a row's status never changes); undefined: no row. */
export interface TxStatusReader {
  /** A new statement: sees every row committed before it starts, never an uncommitted one. */
  readStatus(txId: string): Promise<TxStatus | undefined>;
}

/** The fence table's primitives, as the producer and the check-back fence need them. */
export interface TxRecordStore extends TxStatusReader {
  /**
   * First statement of the producer's local transaction. Returns false when the txId already
   * exists (a check-back fenced it), leaving the caller's transaction usable; any other error is thrown.
   */
  insertCommitted(manager: EntityManager, record: NewTxRecord): Promise<boolean>;
  /**
   * The tombstone INSERT in its own short transaction, waiting at most about `lockWaitTimeoutMs`
   * on another transaction's uncommitted row. Never throws: every error is UNDECIDED.
   */
  insertTombstone(record: NewTxRecord, lockWaitTimeoutMs: number): Promise<TombstoneOutcome>;
  /** Marks transactions whose broker commit was acknowledged (EndTransaction or check-back). */
  markConfirmed(txIds: readonly string[]): Promise<void>;
  /**
   * Optional, for a check-back storm (the fence batches only when a store has both): the rows of
   * many txIds in one plain read (a new statement); a txId without a row is absent from the map.
   */
  readStatuses?(txIds: readonly string[]): Promise<Map<string, TxRecordState>>;
  /**
   * Optional: tombstones for many txIds in one statement of one short transaction (a duplicate
   * is skipped, not an error), waiting at most about `lockWaitTimeoutMs` on any other
   * transaction's uncommitted row (0: as little as the database allows; the fence passes 0 and
   * decides the txIds of a batch that met a lock one by one). Never throws: every error is
   * UNDECIDED, and then none of the rows is known to be written.
   */
  insertTombstones?(records: readonly NewTxRecord[], lockWaitTimeoutMs: number): Promise<TombstonesOutcome>;
}

/** How an event row starts: IN_FLIGHT (a half message carries it) or NEW (the relay sends it). */
export type OutboxInitialStatus = 'IN_FLIGHT' | 'NEW' | 'CDC';

/** One event as the outbox stores it: enough to rebuild the exact message. */
export interface NewOutboxEvent {
  eventId: string;
  txId: string;
  topic: string;
  tag?: string;
  keys: readonly string[];
  properties: Readonly<Record<string, string>>;
  body: Buffer;
  aggregateType?: string;
  aggregateId?: string;
  aggregateVersion?: number;
  eventType?: string;
  eventVersion?: number;
  occurredAt?: Date;
  traceId?: string;
  status: OutboxInitialStatus;
}

/** A row the relay holds a lease on. */
export interface ClaimedOutboxEvent {
  eventId: string;
  txId: string;
  topic: string;
  tag?: string;
  keys: string[];
  properties: Record<string, string>;
  body: Buffer;
  aggregateId?: string;
  attempts: number;
}

export interface ClaimOptions {
  limit: number;
  leaseMs: number;
  owner: string;
  /** Only rows of these topics (a relay handles the topics it was given). */
  topics: readonly string[];
}

/** The outbox table, as the producer and the relay need it. */
export interface OutboxStore {
  /** One multi-row INSERT inside the producer's local transaction, right after tx_record. */
  insertEvents(manager: EntityManager, events: readonly NewOutboxEvent[]): Promise<void>;
  /** Marks events whose half message the broker committed (EndTransaction or check-back). */
  markConfirmed(eventIds: readonly string[]): Promise<void>;
  /**
   * Short transaction: takes up to `limit` due NEW rows with FOR UPDATE SKIP LOCKED and leases
   * them (next_attempt_at = lease end, so an expired lease is due again).
   */
  claim(options: ClaimOptions): Promise<ClaimedOutboxEvent[]>;
  /** The message is on the broker: a NEW (relay) or IN_FLIGHT (discard recovery) row becomes SENT. */
  markSent(eventId: string, owner: string): Promise<void>;
  /** markSent for a batch, in one statement (not fenced by owner, as markSent). */
  markSentMany(eventIds: readonly string[], owner: string): Promise<void>;
  /** Records a failed send: back to NEW after `retryInMs`, or DEAD when `dead`. */
  markFailed(eventId: string, owner: string, error: string, retryInMs: number, dead: boolean): Promise<void>;
  /**
   * Discard reconciliation: IN_FLIGHT rows older than `horizonMs` whose tx_record is COMMITTED
   * become NEW, so the relay republishes them with the same eventId. Returns how many.
   */
  promoteUnconfirmed(horizonMs: number, limit: number, topics: readonly string[]): Promise<number>;
  /** DEAD rows (all, or the given ones) back to NEW with attempts reset. Returns how many. */
  replayDead(eventIds?: readonly string[]): Promise<number>;
  /**
   * The producer's discard recovery: short transaction that takes up to `limit` IN_FLIGHT rows of
   * `producerGroup`'s COMMITTED transactions older than `horizonMs` and not leased (FOR UPDATE SKIP
   * LOCKED), and leases them to `owner` for `leaseMs` (lease_until). The rows stay IN_FLIGHT, so a
   * relay's promotion skips them while the lease holds.
   */
  claimUnconfirmed(options: ClaimUnconfirmedOptions): Promise<ClaimedOutboxEvent[]>;
  /** A republish of a claimed IN_FLIGHT row failed: lease released, due again after `retryInMs`. */
  releaseUnconfirmed(eventId: string, owner: string, error: string, retryInMs: number): Promise<void>;
}

export interface ClaimUnconfirmedOptions {
  producerGroup: string;
  horizonMs: number;
  limit: number;
  leaseMs: number;
  owner: string;
  topics: readonly string[];
}

export interface CursorKey {
  consumerGroup: string;
  aggregateType: string;
  aggregateId: string;
}

export interface ConsumedRow extends CursorKey {
  eventId: string;
  eventType: string;
  aggregateVersion: number;
}

/** The consumer's statements inside its one database transaction per message. */
export interface InboxTransaction {
  readonly manager: EntityManager;
  /** First statement: false when (group, eventId) is already there (a duplicate). */
  insertConsumed(row: ConsumedRow): Promise<boolean>;
  /** Marks the consumed row as STALE or IGNORED (no handler ran). */
  markOutcome(row: ConsumedRow, outcome: 'STALE' | 'IGNORED'): Promise<void>;
  /** Locks the aggregate's cursor row (creating it at 0) and returns its last version. */
  lockCursor(key: CursorKey): Promise<number>;
  advanceCursor(key: CursorKey, version: number, skippedVersions: number): Promise<void>;
  /**
   * lockCursor, and advanceCursor to `version` when it is the next one (or later, with
   * `acceptGap`, counting the versions skipped), as one step: one statement where the database
   * allows it. Returns the version the cursor held before; a stale or held-back version leaves
   * the cursor as it was (see cursorAdvances).
   */
  claimVersion(key: CursorKey, version: number, acceptGap: boolean): Promise<number>;
}

/** consumed_event and aggregate_cursor, as the consumer needs them (see DESIGN.md "Consumer"). */
export interface InboxStore {
  /**
   * Runs `fn` in one transaction; commits when it returns `commit: true`, else rolls back.
   * A throw from `fn` rolls back and rethrows. A failed COMMIT rejects (outcome unknown).
   */
  transaction<T>(fn: (tx: InboxTransaction) => Promise<{ commit: boolean; value: T }>): Promise<T>;
  /** Whether a database error is a lock conflict (deadlock, lock-wait timeout): retry soon. */
  isConflict(err: unknown): boolean;
}
