import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import type { Timestamp } from '@bufbuild/protobuf/wkt';
import type { OutgoingMessage } from '../gateway';
import {
  Code,
  Encoding,
  MessageType,
  TransactionResolution,
  TransactionSource,
} from './gen/apache/rocketmq/v2/definition_pb';
import {
  EndTransactionRequestSchema,
  EndTransactionResponseSchema,
  MessagingService,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  type EndTransactionResponse,
  type SendMessageResponse,
  type SendResultEntry,
} from './gen/apache/rocketmq/v2/service_pb';
import { RocketMqStatusError, statusError } from './status';

/** gRPC paths of the two calls: /<package>.<service>/<method>. */
export const SEND_MESSAGE = `/${MessagingService.typeName}/${MessagingService.method.sendMessage.name}`;
export const END_TRANSACTION = `/${MessagingService.typeName}/${MessagingService.method.endTransaction.name}`;

export function decodeSendMessage(bytes: Uint8Array): SendMessageResponse {
  return fromBinary(SendMessageResponseSchema, bytes);
}

export function decodeEndTransaction(bytes: Uint8Array): EndTransactionResponse {
  return fromBinary(EndTransactionResponseSchema, bytes);
}
export interface SendTarget {
  namespace: string;
  queueId: number;
  messageId: string;
  messageType: MessageType;
  bornHost: string;
  bornTimestamp: Timestamp;
}

/** One message per request: the proxy takes batches only for NORMAL topics (see DESIGN.md). */
export function sendMessageRequest(m: OutgoingMessage, t: SendTarget): Uint8Array {
  return toBinary(
    SendMessageRequestSchema,
    create(SendMessageRequestSchema, {
      messages: [
        {
          topic: { name: m.topic, resourceNamespace: t.namespace },
          userProperties: m.properties,
          systemProperties: {
            ...(m.tag !== undefined && m.tag !== '' ? { tag: m.tag } : {}),
            keys: m.keys,
            messageId: t.messageId,
            bodyEncoding: Encoding.IDENTITY,
            messageType: t.messageType,
            bornTimestamp: t.bornTimestamp,
            bornHost: t.bornHost,
            queueId: t.queueId,
            ...(m.messageGroup !== undefined ? { messageGroup: m.messageGroup } : {}),
          },
          body: m.body,
        },
      ],
    }),
  );
}

export function endTransactionRequest(
  namespace: string,
  topic: string,
  messageId: string,
  transactionId: string,
  commit: boolean,
): Uint8Array {
  return toBinary(
    EndTransactionRequestSchema,
    create(EndTransactionRequestSchema, {
      topic: { name: topic, resourceNamespace: namespace },
      messageId,
      transactionId,
      resolution: commit ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK,
      source: TransactionSource.SOURCE_CLIENT,
    }),
  );
}

/**
 * The receipt of a one-message send. As the official client: an entry's non-OK status wins
 * over the response's, and a non-OK status throws (RocketMqStatusError).
 */
export function firstReceipt(response: SendMessageResponse): SendResultEntry {
  for (const entry of response.entries) {
    const failure = statusError(entry.status);
    if (failure) throw failure;
  }
  const failure = statusError(response.status);
  if (failure) throw failure;
  const entry = response.entries[0];
  if (!entry) {
    throw new RocketMqStatusError(
      'InternalErrorException',
      Code.INTERNAL_ERROR,
      'the proxy answered SendMessage without a result entry',
      true,
    );
  }
  return entry;
}
