/**
 * The SDK's own answer to a broker check-back. UNKNOWN sends no reply: the broker asks again
 * at its next check interval (and, after its check budget, discards the half message; the
 * relay's discard reconciliation republishes committed events in that case).
 */
export const TransactionResolution = {
  COMMIT: 'COMMIT',
  ROLLBACK: 'ROLLBACK',
  UNKNOWN: 'UNKNOWN',
} as const;
export type TransactionResolution = (typeof TransactionResolution)[keyof typeof TransactionResolution];

/** A half message the broker asks about, as the SDK exposes it (no client or protobuf types). */
export interface CheckBackMessage {
  readonly messageId: string;
  readonly topic: string;
  readonly tag?: string;
  readonly keys: readonly string[];
  readonly properties: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly bornAt?: Date;
  /** The SDK's transaction id (property TX_ID), when the message was sent by rocketmq-tx. */
  readonly txId?: string;
  /** The producerGroup that sent it (property TX_ORIGIN), when sent by rocketmq-tx. */
  readonly origin?: string;
}

/**
 * Decides the fate of an in-doubt half message. Must be idempotent and deterministic: any
 * instance may be asked, any number of times, concurrently. Return UNKNOWN when unsure; a
 * throw is treated as UNKNOWN. Never answer ROLLBACK because a lookup failed.
 */
export interface CheckBackResolver {
  resolve(message: CheckBackMessage): Promise<TransactionResolution>;
}

/** Message properties the SDK owns; user properties may not use these names. */
export const TX_ID_PROPERTY = 'TX_ID';
export const TX_ORIGIN_PROPERTY = 'TX_ORIGIN';
export const EVENT_ID_PROPERTY = 'EVENT_ID';
export const RESERVED_PROPERTIES: readonly string[] = [TX_ID_PROPERTY, TX_ORIGIN_PROPERTY, EVENT_ID_PROPERTY];
