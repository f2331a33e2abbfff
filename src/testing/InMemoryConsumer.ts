import type { DataSource } from 'typeorm';
import { InvalidOptionError } from '../errors';
import { serializeEnvelope, type Envelope } from '../envelope/envelope';
import { AGGREGATE_ID_PROPERTY, EVENT_TYPE_PROPERTY } from '../envelope/envelope';
import { EVENT_ID_PROPERTY } from '../checkback/resolution';
import { HandlerRegistry } from '../consumer/handlers';
import { MessageProcessor } from '../consumer/MessageProcessor';
import type { IdempotentConsumerOptions } from '../consumer/options';
import { ACKED_KINDS, type ConsumeOutcome } from '../consumer/outcome';
import { storesFor } from '../store';
import type { InboxStore } from '../store/ports';
import { requireDataSource, requireResourceName } from '../util/clientOptions';
import { optionalInt, rejectUnknownKeys, requireObject } from '../util/validate';
import { uuidv7 } from '../util/uuidv7';
import type { RecordedMessage } from './messages';
import { MemoryInboxStore } from '../store/memory/inboxStore';
import { seeded, shuffleInPlace } from './random';

/** Where the consumed_event / aggregate_cursor rows live in a test. */
export type InMemoryInbox = 'auto' | 'database' | 'memory';

/**
 * The IdempotentConsumer options that decide what a delivery does (no broker options), and
 * where its dedupe rows live: 'database' (the SDK's tables on MySQL/MariaDB/PostgreSQL, run
 * your migrations first), 'memory' (any database, SQLite included), 'auto' (default: database
 * when the SDK supports it, memory otherwise).
 */
export type InMemoryConsumerOptions = Pick<
  IdempotentConsumerOptions,
  | 'dataSource'
  | 'consumerGroup'
  | 'handlers'
  | 'upcasters'
  | 'gapPolicy'
  | 'unknownEventTypes'
  | 'maxBodyBytes'
  | 'onOutcome'
> & { inbox?: InMemoryInbox };

export type DeliveryOrder = 'as-sent' | 'reverse' | 'shuffle';

export interface DeliverAllOptions {
  /** Order of the first deliveries. Default 'as-sent'. */
  order?: DeliveryOrder;
  /** Seed of the 'shuffle' order (the same seed gives the same order). Default 1. */
  seed?: number;
  /** Deliver every message twice (the second right after the first): the broker's at-least-once. */
  duplicate?: boolean;
  /**
   * Deliveries per message before it is dead-lettered, as the broker does past the group's max
   * reconsume count. Messages not acked (gap held, handler failed) are redelivered after the
   * others. Default 16.
   */
  maxDeliveryAttempts?: number;
}

export interface DeliveryReport {
  /** One per delivery, in the order they ran. */
  outcomes: ConsumeOutcome[];
  /** Event ids whose effect was applied (APPLIED), in order. */
  applied: string[];
  /** Deliveries acked without running the handler again (DUPLICATE). */
  duplicates: number;
  /** Messages that ended in the dead-letter queue (malformed, or past maxDeliveryAttempts). */
  deadLettered: RecordedMessage[];
}

const KNOWN = [
  'dataSource',
  'consumerGroup',
  'handlers',
  'upcasters',
  'gapPolicy',
  'unknownEventTypes',
  'maxBodyBytes',
  'onOutcome',
  'inbox',
];

/**
 * A stand-in for IdempotentConsumer in unit tests: no broker. Your test delivers messages (from
 * an InMemoryProducer, or made with messageOf) in any order, any number of times; each delivery
 * runs the consumer's real decision code — dedupe, per-aggregate order, your handler in one
 * transaction — on your DataSource, and tells you what the real consumer would have done.
 */
export class InMemoryConsumer {
  private readonly processor: MessageProcessor;
  private readonly store: InboxStore;
  private readonly onOutcome: ((outcome: ConsumeOutcome) => void) | undefined;
  readonly consumerGroup: string;
  /** Where the dedupe rows live ('database' or 'memory'), 'auto' resolved. */
  readonly inbox: 'database' | 'memory';

  constructor(options: InMemoryConsumerOptions) {
    const o = requireObject('options', options);
    rejectUnknownKeys('options', o, KNOWN);
    const dataSource = requireDataSource(o.dataSource);
    this.consumerGroup = requireResourceName('consumerGroup', o.consumerGroup);
    const registry = new HandlerRegistry(o.handlers, o.upcasters);
    const gapPolicy = o.gapPolicy ?? 'hold';
    if (gapPolicy !== 'hold' && gapPolicy !== 'accept') {
      throw new InvalidOptionError('gapPolicy', gapPolicy, '"hold" or "accept"');
    }
    const unknownEventTypes = o.unknownEventTypes ?? 'retry';
    if (unknownEventTypes !== 'retry' && unknownEventTypes !== 'ignore') {
      throw new InvalidOptionError('unknownEventTypes', unknownEventTypes, '"retry" or "ignore"');
    }
    if (o.onOutcome !== undefined && typeof o.onOutcome !== 'function') {
      throw new InvalidOptionError('onOutcome', o.onOutcome, 'a function');
    }
    this.onOutcome = o.onOutcome as ((outcome: ConsumeOutcome) => void) | undefined;
    const inbox = o.inbox ?? 'auto';
    if (inbox !== 'auto' && inbox !== 'database' && inbox !== 'memory') {
      throw new InvalidOptionError('inbox', inbox, '"auto", "database" or "memory"');
    }
    const supported = sdkDatabase(dataSource);
    if (inbox === 'database' && !supported) {
      throw new InvalidOptionError(
        'inbox',
        inbox,
        `"memory" or "auto" (the SDK's tables need MySQL/MariaDB or PostgreSQL; this DataSource is ${String(dataSource.options.type)})`,
      );
    }
    this.inbox = inbox === 'memory' || !supported ? 'memory' : 'database';
    this.store = this.inbox === 'memory' ? new MemoryInboxStore(dataSource) : storesFor(dataSource).inbox;
    this.processor = new MessageProcessor(this.store, {
      consumerGroup: this.consumerGroup,
      registry,
      gapPolicy,
      unknownEventTypes,
      maxBodyBytes: optionalInt('maxBodyBytes', o.maxBodyBytes, 1024 * 1024, 64, 4 * 1024 * 1024),
    });
  }

  /** Delivers one message once, as the broker's delivery number `deliveryAttempt` (default 1). */
  async deliver(
    message: RecordedMessage,
    options: { deliveryAttempt?: number } = {},
  ): Promise<ConsumeOutcome> {
    const deliveryAttempt = optionalInt('deliveryAttempt', options.deliveryAttempt, 1, 1, 1_000_000);
    const decision = await this.processor.process({
      messageId: message.messageId,
      topic: message.topic,
      ...(message.tag !== undefined ? { tag: message.tag } : {}),
      keys: message.keys,
      properties: message.properties,
      body: message.body,
      deliveryAttempt,
    });
    const outcome = {
      ...decision,
      messageId: message.messageId,
      topic: message.topic,
      deliveryAttempt,
      deadLettered: decision.kind === 'MALFORMED',
    } as ConsumeOutcome;
    this.onOutcome?.(outcome);
    return outcome;
  }

  /**
   * Delivers messages as a broker would: in the order asked, each duplicated when asked; what is
   * not acked (a held gap, a failed handler) is redelivered after the rest until it is acked or
   * reaches maxDeliveryAttempts (then dead-lettered, as the real consumer does).
   */
  async deliverAll(
    messages: readonly RecordedMessage[],
    options: DeliverAllOptions = {},
  ): Promise<DeliveryReport> {
    const o = requireObject('options', options);
    rejectUnknownKeys('options', o, ['order', 'seed', 'duplicate', 'maxDeliveryAttempts']);
    const order = o.order ?? 'as-sent';
    if (order !== 'as-sent' && order !== 'reverse' && order !== 'shuffle') {
      throw new InvalidOptionError('order', order, '"as-sent", "reverse" or "shuffle"');
    }
    const seed = optionalInt('seed', o.seed, 1, 0, 2 ** 32 - 1);
    if (o.duplicate !== undefined && typeof o.duplicate !== 'boolean') {
      throw new InvalidOptionError('duplicate', o.duplicate, 'a boolean');
    }
    const max = optionalInt('maxDeliveryAttempts', o.maxDeliveryAttempts, 16, 1, 1000);
    const list = [...messages];
    if (order === 'reverse') list.reverse();
    if (order === 'shuffle') shuffle(list, seed);
    const queue: Array<{ message: RecordedMessage; attempt: number }> = [];
    for (const message of list) {
      queue.push({ message, attempt: 1 });
      if (o.duplicate === true) queue.push({ message, attempt: 1 });
    }
    const report: DeliveryReport = { outcomes: [], applied: [], duplicates: 0, deadLettered: [] };
    for (let next = queue.shift(); next; next = queue.shift()) {
      const outcome = await this.deliver(next.message, { deliveryAttempt: next.attempt });
      const acked = ACKED_KINDS.includes(outcome.kind);
      const last = !acked && (outcome.kind === 'MALFORMED' || next.attempt >= max);
      const final = last ? ({ ...outcome, deadLettered: true } as ConsumeOutcome) : outcome;
      report.outcomes.push(final);
      if (outcome.kind === 'APPLIED') report.applied.push(outcome.envelope.eventId);
      if (outcome.kind === 'DUPLICATE') report.duplicates++;
      if (last) report.deadLettered.push(next.message);
      else if (!acked) queue.push({ message: next.message, attempt: next.attempt + 1 });
    }
    return report;
  }

  /** Event ids this consumer group recorded as consumed (memory inbox only; use your database otherwise). */
  consumedEventIds(): string[] {
    if (!(this.store instanceof MemoryInboxStore)) {
      throw new InvalidOptionError('inbox', this.inbox, '"memory" (read consumed_event in your database)');
    }
    return this.store.consumedIds(this.consumerGroup);
  }
}

/** A message carrying an envelope, as the real producer sends it: for consumer-only tests. */
export function messageOf(
  envelope: Envelope,
  options: { topic?: string; tag?: string; txId?: string } = {},
): RecordedMessage {
  const txId = options.txId ?? uuidv7();
  return {
    messageId: uuidv7(),
    topic: options.topic ?? 'test-topic',
    ...(options.tag !== undefined ? { tag: options.tag } : {}),
    keys: [envelope.eventId, envelope.aggregateId],
    properties: {
      [EVENT_ID_PROPERTY]: envelope.eventId,
      [EVENT_TYPE_PROPERTY]: envelope.eventType,
      [AGGREGATE_ID_PROPERTY]: envelope.aggregateId,
    },
    body: serializeEnvelope(envelope),
    eventId: envelope.eventId,
    txId,
    envelope,
  };
}

function sdkDatabase(dataSource: DataSource): boolean {
  const type = String(dataSource.options.type);
  return type === 'mysql' || type === 'mariadb' || type === 'postgres';
}

/** Fisher-Yates with mulberry32: a reproducible order per seed. */
function shuffle<T>(list: T[], seed: number): void {
  shuffleInPlace(list, seeded(seed));
}
