import type { TransactionOutcomeLabel } from '../observability/observer';
import type { DeliveryMode } from './options';

/** What one transact() call ended in (the producer's onOutcome hook). */
export interface TransactionOutcome {
  txId: string;
  /** committed, rolled_back (work threw), fenced, outcome_unknown, failed (the SDK's own error). */
  outcome: TransactionOutcomeLabel;
  /** How the events went out (after an outbox fallback: 'outbox'). */
  delivery: DeliveryMode;
  durationMs: number;
  /** The error transact() rejected with (every outcome but committed). */
  error?: unknown;
}
