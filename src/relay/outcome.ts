/** What happened to one outbox event on one delivery attempt (the relay's onOutcome hook). */
export interface RelayOutcome {
  eventId: string;
  topic: string;
  /** sent: delivered, marked SENT; retry: rescheduled with the retry delay; dead: past maxAttempts, DEAD. */
  result: 'sent' | 'retry' | 'dead';
  /** Tries of this event so far, this one included. */
  attempts: number;
  /** The send error (retry, dead). */
  error?: unknown;
  /** Delay until the next try (retry). */
  retryInMs?: number;
}
