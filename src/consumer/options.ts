import {
  CONNECTION_OPTION_KEYS,
  RESOURCE_NAME_RE,
  RESOURCE_NAME_RULE,
  requireResourceName,
  resolveConnection,
  type ConnectionOptions,
  type ResolvedConnection,
} from '../util/clientOptions';
import { InvalidOptionError } from '../errors';
import { resolveRetryPolicy, type RetryOptions, type RetryPolicy } from '../util/retryPolicy';
import {
  optionalInt,
  optionalString,
  rejectUnknownKeys,
  requireObject,
  requireString,
} from '../util/validate';
import { HandlerRegistry, type EventHandler, type Upcaster } from './handlers';
import type { ConsumeOutcome } from './outcome';

export type GapPolicy = 'hold' | 'accept';
export type UnknownEventTypePolicy = 'retry' | 'ignore';

export interface Subscription {
  topic: string;
  /** Tag filter expression, e.g. "created||paid". Default "*". */
  tag?: string;
}

/**
 * The consumer's redelivery schedule: a RetryPolicy (the same shape as the relay's `retry`).
 * Defaults: initialDelayMs 1000, maxDelayMs 60000, jitterMs 200.
 */
export type ConsumerRetryOptions = RetryOptions;

/** The connection options (ConnectionOptions; shutdownTimeoutMs defaults to 30000 ms here) and: */
export interface IdempotentConsumerOptions extends ConnectionOptions {
  /** The consumer group; every instance of one service uses the same one. */
  consumerGroup: string;
  /** Topics (and tag filters) to consume. */
  subscriptions: ReadonlyArray<string | Subscription>;
  /** One handler per (eventType, eventVersion). */
  handlers: readonly EventHandler[];
  /** Turn older contract versions into the versions handlers accept, one step at a time. */
  upcasters?: readonly Upcaster[];
  /** Messages handled at once on this instance (each holds one DB connection). Default 8. */
  concurrency?: number;
  /** Out-of-order versions: 'hold' (default: no ack, redeliver until the gap fills) or 'accept'. */
  gapPolicy?: GapPolicy;
  /** Events whose eventType has no handler: 'retry' (default, like an unknown version) or 'ignore' (acked, counted). */
  unknownEventTypes?: UnknownEventTypePolicy;
  /** Delay of redeliveries of failed or held messages, doubling per delivery attempt. */
  retry?: ConsumerRetryOptions;
  /** Bodies larger than this are malformed (dead-lettered unparsed). Default 1 MiB. */
  maxBodyBytes?: number;
  /** How long a received message stays invisible to other consumers while handled. Default 30000 ms (min 10000). */
  invisibleDurationMs?: number;
  /** Long polling per receive. Default 5000 ms (the proxy's minimum). */
  longPollingMs?: number;
  /** Called after every settled message (metrics, audit). Must not throw; errors are logged. */
  onOutcome?: (outcome: ConsumeOutcome) => void;
}

export interface ResolvedConsumerOptions extends ResolvedConnection {
  consumerGroup: string;
  subscriptions: ReadonlyMap<string, string>;
  registry: HandlerRegistry;
  concurrency: number;
  gapPolicy: GapPolicy;
  unknownEventTypes: UnknownEventTypePolicy;
  retry: RetryPolicy;
  maxBodyBytes: number;
  invisibleDurationMs: number;
  longPollingMs: number;
  onOutcome?: (outcome: ConsumeOutcome) => void;
}

const KNOWN = [
  ...CONNECTION_OPTION_KEYS,
  'consumerGroup',
  'subscriptions',
  'handlers',
  'upcasters',
  'concurrency',
  'gapPolicy',
  'unknownEventTypes',
  'retry',
  'maxBodyBytes',
  'invisibleDurationMs',
  'longPollingMs',
  'onOutcome',
] as const;

export function resolveConsumerOptions(input: unknown): ResolvedConsumerOptions {
  const o = requireObject('options', input);
  rejectUnknownKeys('options', o, KNOWN);
  const connection = resolveConnection(o, { shutdownTimeoutMs: 30_000 });
  const consumerGroup = requireResourceName('consumerGroup', o.consumerGroup);
  const subscriptions = resolveSubscriptions(o.subscriptions);
  const registry = new HandlerRegistry(o.handlers, o.upcasters);
  const gapPolicy = o.gapPolicy ?? 'hold';
  if (gapPolicy !== 'hold' && gapPolicy !== 'accept') {
    throw new InvalidOptionError('gapPolicy', gapPolicy, '"hold" or "accept"');
  }
  const unknownEventTypes = o.unknownEventTypes ?? 'retry';
  if (unknownEventTypes !== 'retry' && unknownEventTypes !== 'ignore') {
    throw new InvalidOptionError('unknownEventTypes', unknownEventTypes, '"retry" or "ignore"');
  }
  const retry = resolveRetryPolicy('retry', o.retry, {
    initialDelayMs: 1000,
    maxDelayMs: 60_000,
    jitterMs: 200,
    maxAllowedDelayMs: 7_200_000,
  });
  if (o.onOutcome !== undefined && typeof o.onOutcome !== 'function') {
    throw new InvalidOptionError('onOutcome', o.onOutcome, 'a function');
  }
  return {
    ...connection,
    consumerGroup,
    subscriptions,
    registry,
    concurrency: optionalInt('concurrency', o.concurrency, 8, 1, 256),
    gapPolicy,
    unknownEventTypes,
    retry,
    maxBodyBytes: optionalInt('maxBodyBytes', o.maxBodyBytes, 1024 * 1024, 64, 4 * 1024 * 1024),
    invisibleDurationMs: optionalInt(
      'invisibleDurationMs',
      o.invisibleDurationMs,
      30_000,
      10_000,
      43_200_000,
    ),
    longPollingMs: optionalInt('longPollingMs', o.longPollingMs, 5000, 5000, 60_000),
    ...(o.onOutcome ? { onOutcome: o.onOutcome as (outcome: ConsumeOutcome) => void } : {}),
  };
}

function resolveSubscriptions(value: unknown): ReadonlyMap<string, string> {
  if (!Array.isArray(value) || value.length === 0) {
    throw new InvalidOptionError(
      'subscriptions',
      value,
      'a non-empty array of topic names or { topic, tag }',
    );
  }
  const out = new Map<string, string>();
  // Array.from: a hole in a sparse array is checked as undefined, not skipped.
  Array.from(value).forEach((s: unknown, i) => {
    const path = `subscriptions[${i}]`;
    const sub = typeof s === 'string' ? { topic: s } : requireObject(path, s);
    if (typeof s !== 'string') rejectUnknownKeys(path, sub, ['topic', 'tag']);
    const topic = requireString(typeof s === 'string' ? path : `${path}.topic`, sub.topic, {
      pattern: RESOURCE_NAME_RE,
      describe: `a topic ${RESOURCE_NAME_RULE}`,
    });
    const tag = optionalString(`${path}.tag`, sub.tag, '*', { maxLength: 1024 });
    if (out.has(topic)) throw new InvalidOptionError(path, topic, 'each topic once');
    out.set(topic, tag);
  });
  return out;
}
