import type { BrokerGateway, OutgoingMessage } from '../broker/gateway';
import type { ClaimedOutboxEvent } from '../store/ports';
import { withTimeout } from '../util/time';

/** The exact message an outbox row was written for (same eventId, TX_ID, keys, tag and body). */
export function outboxMessage(row: ClaimedOutboxEvent, fifo: boolean): OutgoingMessage {
  return {
    topic: row.topic,
    ...(row.tag !== undefined ? { tag: row.tag } : {}),
    keys: row.keys,
    properties: row.properties,
    body: row.body,
    ...(fifo ? { messageGroup: row.aggregateId ?? row.txId } : {}),
  };
}

/**
 * Sends `message` so that it is delivered: a normal send, or on a TRANSACTION topic (which takes
 * no normal message) a half message committed at once. A lost commit is resolved by the
 * producers' fence: TX_ID names a COMMITTED tx_record. Rejects when either step is not
 * acknowledged within `limitMs` (the client can hang while the proxy restarts; a late success
 * is a same-eventId duplicate).
 */
export function sendCommitted(
  gateway: BrokerGateway,
  message: OutgoingMessage,
  transactional: boolean,
  limitMs: number,
): Promise<void> {
  const send = async (): Promise<void> => {
    if (!transactional) {
      await gateway.send(message);
      return;
    }
    const half = await gateway.sendHalf(message);
    await gateway.endTransaction(half, true);
  };
  return withTimeout(send(), limitMs, () => new Error(`send did not finish within ${limitMs} ms`));
}

/** A send error as the outbox stores it in last_error. */
export function errorText(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
