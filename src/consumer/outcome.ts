import type { Envelope } from '../envelope/envelope';

/**
 * What became of one delivery. APPLIED / DUPLICATE / STALE / IGNORED are acked; MALFORMED is
 * dead-lettered at once; the rest are redelivered with backoff and dead-lettered past the
 * group's max delivery attempts (then `deadLettered` is true). Nothing failed is ever acked.
 */
export type ConsumeOutcome = {
  readonly messageId: string;
  readonly topic: string;
  readonly deliveryAttempt: number;
  /** The message was moved to the dead-letter queue %DLQ%<group>. */
  readonly deadLettered: boolean;
} & (
  | { readonly kind: 'APPLIED'; readonly envelope: Envelope; readonly gap?: { expectedVersion: number } }
  | { readonly kind: 'DUPLICATE'; readonly envelope: Envelope }
  | { readonly kind: 'STALE'; readonly envelope: Envelope; readonly cursorVersion: number }
  | { readonly kind: 'IGNORED'; readonly envelope: Envelope }
  | { readonly kind: 'GAP_HELD'; readonly envelope: Envelope; readonly cursorVersion: number }
  | { readonly kind: 'MALFORMED'; readonly error: unknown }
  | { readonly kind: 'UNHANDLED'; readonly envelope: Envelope; readonly error: unknown }
  | { readonly kind: 'HANDLER_FAILED'; readonly envelope: Envelope; readonly error: unknown }
  | { readonly kind: 'STORE_FAILED'; readonly envelope: Envelope; readonly error: unknown }
);

export type OutcomeKind = ConsumeOutcome['kind'];

/** Kinds acked as done (the effect is in the database, or there is nothing to apply). */
export const ACKED_KINDS: readonly OutcomeKind[] = ['APPLIED', 'DUPLICATE', 'STALE', 'IGNORED'];
