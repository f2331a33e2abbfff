import { BrokerUnavailableError, InvalidMessageError, RocketMqTxError } from '../errors';

/** Maps a client or gRPC failure of a send to the SDK's typed errors. */
export function mapSendError(err: unknown, topic: string, path: string): RocketMqTxError {
  if (err instanceof RocketMqTxError) return err;
  const name = err instanceof Error ? err.name : '';
  const message = err instanceof Error ? err.message : String(err);
  if (name === 'NotFoundException' || /TOPIC_NOT_FOUND|topic.*not.*exist|No topic route/i.test(message)) {
    return new InvalidMessageError(`${path}.topic`, topic, 'a topic that exists on the broker', err);
  }
  if (name === 'PayloadTooLargeException' || name === 'RequestHeaderFieldsTooLargeException') {
    return new InvalidMessageError(path, topic, 'a message within the broker size limits', err);
  }
  if (err instanceof TypeError && /message type not match/i.test(message)) {
    return new InvalidMessageError(
      `${path}.topic`,
      topic,
      'a topic whose message.type accepts this message',
      err,
    );
  }
  if (name === 'BadRequestException') {
    return new InvalidMessageError(path, topic, 'a message the broker accepts', err);
  }
  return new BrokerUnavailableError(`Broker did not accept the message for topic ${topic}: ${message}`, err);
}
