import type { EntityManager } from 'typeorm';

export type TxStatus = 'COMMITTED' | 'ROLLED_BACK';

export interface NewTxRecord {
  txId: string;
  producerGroup: string;
  topic: string;
  eventCount: number;
}

/**
 * Outcome of the check-back fence for one txId.
 * - `FENCED`: we inserted the ROLLED_BACK tombstone; the producer's later insert will fail.
 * - `COMMITTED` / `ROLLED_BACK`: the row existed (fresh read after the duplicate key).
 * - `UNDECIDED`: lock-wait timeout, deadlock victim, or any database error: answer nothing.
 */
export type FenceOutcome =
  | { kind: 'FENCED' }
  | { kind: 'COMMITTED' }
  | { kind: 'ROLLED_BACK' }
  | { kind: 'UNDECIDED'; reason: 'LOCK_WAIT_TIMEOUT' | 'DEADLOCK' | 'DATABASE_ERROR'; error: unknown };

/** The fence table, as the producer and the check-back need it. */
export interface TxRecordStore {
  /**
   * First statement of the producer's local transaction. Returns false when the txId already
   * exists (a check-back fenced it); any other error is thrown.
   */
  insertCommitted(manager: EntityManager, record: NewTxRecord): Promise<boolean>;
  /** The check-back's write-to-decide (see DESIGN.md "Check-back: a fence, never a guess"). */
  fence(record: NewTxRecord, lockWaitTimeoutMs: number): Promise<FenceOutcome>;
  /** Marks transactions whose broker commit was acknowledged (EndTransaction or check-back). */
  markConfirmed(txIds: readonly string[]): Promise<void>;
}
