import type { InboundMessage } from '../broker/consumerGateway';
import { checkData, parseEnvelope, type Envelope } from '../envelope/envelope';
import { InvalidMessageError } from '../errors';
import { EVENT_ID_PROPERTY, TX_ID_PROPERTY, TX_ORIGIN_PROPERTY } from '../checkback/resolution';
import { AGGREGATE_ID_PROPERTY, EVENT_TYPE_PROPERTY } from '../envelope/envelope';
import { RESOURCE_NAME_RE } from '../util/clientOptions';
import { isUuid } from '../util/uuidv7';
import type { HandlerRegistry } from './handlers';
import type { ConsumedRow, InboxStore } from '../store/ports';
import type { GapPolicy, UnknownEventTypePolicy } from './options';
import type { ConsumeOutcome } from './outcome';

export type Decision = ConsumeOutcome extends infer O
  ? O extends ConsumeOutcome
    ? Omit<O, 'messageId' | 'topic' | 'deliveryAttempt' | 'deadLettered'>
    : never
  : never;

export interface ProcessorConfig {
  consumerGroup: string;
  registry: HandlerRegistry;
  gapPolicy: GapPolicy;
  unknownEventTypes: UnknownEventTypePolicy;
  maxBodyBytes: number;
}

/** Marks an error thrown by the user's handler, to tell it from the SDK's own statements. */
class HandlerFailure {
  constructor(readonly error: unknown) {}
}

/**
 * The consumer's decision for one message, in ONE database transaction: insert consumed_event
 * (duplicate -> nothing else), lock aggregate_cursor and advance it if this version is next (or
 * a gap is accepted), decide stale / gap held / apply, run the handler with the same
 * EntityManager, commit. Knows nothing of the broker.
 */
export class MessageProcessor {
  constructor(
    private readonly store: InboxStore,
    private readonly config: ProcessorConfig,
  ) {}

  async process(message: InboundMessage): Promise<Decision> {
    let envelope: Envelope;
    try {
      envelope = parseEnvelope(message.body, this.config.maxBodyBytes);
    } catch (error) {
      return { kind: 'MALFORMED', error };
    }
    const forged = forgedProperty(message.properties, envelope);
    if (forged) return { kind: 'MALFORMED', error: forged };
    let resolution;
    try {
      resolution = this.config.registry.resolve(envelope);
    } catch (error) {
      // An upcaster threw: the data does not fit the contract it claims.
      return {
        kind: 'MALFORMED',
        error: new InvalidMessageError('body.data', envelope.data, 'data an upcaster accepts', error),
      };
    }
    if (
      resolution.kind === 'unknown-version' ||
      (resolution.kind === 'unknown-type' && this.config.unknownEventTypes === 'retry')
    ) {
      return { kind: 'UNHANDLED', envelope, error: resolution.error };
    }
    if (resolution.kind === 'handler' && resolution.handler.validate) {
      try {
        checkData(resolution.handler.validate, resolution.envelope.data, 'body.data');
      } catch (error) {
        return { kind: 'MALFORMED', error };
      }
    }
    const row: ConsumedRow = {
      consumerGroup: this.config.consumerGroup,
      eventId: envelope.eventId,
      eventType: envelope.eventType,
      aggregateType: envelope.aggregateType,
      aggregateId: envelope.aggregateId,
      aggregateVersion: envelope.aggregateVersion,
    };
    try {
      return await this.store.transaction<Decision>(async (tx) => {
        if (!(await tx.insertConsumed(row))) return { commit: false, value: { kind: 'DUPLICATE', envelope } };
        // Locks the cursor and, when this version moves it, advances it in the same step (one
        // statement on MySQL/MariaDB): a handler failure rolls the advance back with the rest.
        const version = envelope.aggregateVersion;
        const acceptGap = this.config.gapPolicy === 'accept';
        const last = await tx.claimVersion(row, version, acceptGap);
        if (version <= last) {
          await tx.markOutcome(row, 'STALE');
          return { commit: true, value: { kind: 'STALE', envelope, cursorVersion: last } };
        }
        const gap = version > last + 1;
        if (gap && !acceptGap) {
          return { commit: false, value: { kind: 'GAP_HELD', envelope, cursorVersion: last } };
        }
        if (resolution.kind !== 'handler') {
          await tx.markOutcome(row, 'IGNORED');
          return { commit: true, value: { kind: 'IGNORED', envelope } };
        }
        try {
          await resolution.handler.handle(resolution.envelope, {
            manager: tx.manager,
            consumerGroup: this.config.consumerGroup,
            message: {
              messageId: message.messageId,
              topic: message.topic,
              ...(message.tag !== undefined ? { tag: message.tag } : {}),
              deliveryAttempt: message.deliveryAttempt,
              ...traceContext(message.properties),
            },
            ...(resolution.upcastFrom !== undefined ? { upcastFrom: resolution.upcastFrom } : {}),
            ...(gap ? { gap: { expectedVersion: last + 1, receivedVersion: version } } : {}),
          });
        } catch (error) {
          throw new HandlerFailure(error);
        }
        return {
          commit: true,
          value: { kind: 'APPLIED', envelope, ...(gap ? { gap: { expectedVersion: last + 1 } } : {}) },
        };
      });
    } catch (err) {
      if (err instanceof HandlerFailure) return { kind: 'HANDLER_FAILED', envelope, error: err.error };
      return { kind: 'STORE_FAILED', envelope, error: err };
    }
  }
}

/**
 * The SDK's properties, when present, must agree with the envelope and be well formed: a
 * message whose EVENT_ID, EVENT_TYPE or AGGREGATE_ID contradicts its body, or whose TX_ID /
 * TX_ORIGIN is malformed, was not sent by rocketmq-tx and is rejected (dead-lettered).
 */
function forgedProperty(
  properties: Readonly<Record<string, string>>,
  envelope: Envelope,
): InvalidMessageError | undefined {
  const same = (name: string, expected: string) => {
    const v = properties[name];
    return v === undefined || v === expected
      ? undefined
      : new InvalidMessageError(`properties.${name}`, v, `the envelope's value (${expected})`);
  };
  const txId = properties[TX_ID_PROPERTY];
  if (txId !== undefined && !isUuid(txId)) {
    return new InvalidMessageError(`properties.${TX_ID_PROPERTY}`, txId, 'a lowercase UUID');
  }
  const origin = properties[TX_ORIGIN_PROPERTY];
  if (origin !== undefined && !RESOURCE_NAME_RE.test(origin)) {
    return new InvalidMessageError(`properties.${TX_ORIGIN_PROPERTY}`, origin, 'a producer group name');
  }
  return (
    same(EVENT_ID_PROPERTY, envelope.eventId) ??
    same(EVENT_TYPE_PROPERTY, envelope.eventType) ??
    same(AGGREGATE_ID_PROPERTY, envelope.aggregateId)
  );
}

// 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>; anything else is not passed on.
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

function traceContext(properties: Readonly<Record<string, string>>): { traceparent?: string } {
  const value = properties['traceparent'];
  return value !== undefined && TRACEPARENT.test(value) ? { traceparent: value } : {};
}
