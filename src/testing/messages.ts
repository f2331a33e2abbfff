import type { Envelope } from '../envelope/envelope';

/** A message the in-memory producer recorded: what the broker would deliver after the commit. */
export interface RecordedMessage {
  /** A fresh id per recorded message (the broker's message id in real life). */
  readonly messageId: string;
  readonly topic: string;
  readonly tag?: string;
  readonly keys: readonly string[];
  /** The SDK's properties (TX_ID, TX_ORIGIN, EVENT_ID, EVENT_TYPE, AGGREGATE_ID) and yours. */
  readonly properties: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly eventId: string;
  readonly txId: string;
  /** The envelope, for envelope events. */
  readonly envelope?: Envelope;
}
