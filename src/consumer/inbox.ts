import type { EntityManager } from 'typeorm';

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
