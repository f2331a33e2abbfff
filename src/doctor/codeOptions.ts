/**
 * The code checks' inputs of doctor: the consumers (their handlers and upcasters) and the event
 * types each topic carries, validated.
 */
import { InvalidOptionError } from '../errors';
import { HandlerRegistry } from '../consumer/handlers';
import type { IdempotentConsumerOptions, Subscription } from '../consumer/options';
import { requireResourceName } from '../util/clientOptions';
import { optionalInt, optionalObject } from '../util/validate';

/** A consumer as doctor sees it: the parts of IdempotentConsumerOptions its checks read (pass your options). */
export type DoctorConsumerOptions = Pick<
  IdempotentConsumerOptions,
  'consumerGroup' | 'subscriptions' | 'handlers' | 'upcasters' | 'unknownEventTypes'
>;

/** An event type and contract version a topic carries (an EventDefinition fits). */
export interface DoctorEventType {
  eventType: string;
  eventVersion: number;
}

export interface ResolvedDoctorConsumer {
  consumerGroup: string;
  topics: string[];
  registry: HandlerRegistry;
  unknownEventTypes: 'retry' | 'ignore';
}

export function resolveDoctorConsumers(value: unknown): ResolvedDoctorConsumer[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > 100) {
    throw new InvalidOptionError('consumers', value, 'an array of at most 100 consumer options');
  }
  return value.map((raw: unknown, i: number) => {
    const c = optionalObject(`consumers[${i}]`, raw);
    const subs = c.subscriptions;
    if (!Array.isArray(subs) || subs.length === 0) {
      throw new InvalidOptionError(`consumers[${i}].subscriptions`, subs, 'a non-empty array of topics');
    }
    const unknown = c.unknownEventTypes ?? 'retry';
    if (unknown !== 'retry' && unknown !== 'ignore') {
      throw new InvalidOptionError(`consumers[${i}].unknownEventTypes`, unknown, '"retry" or "ignore"');
    }
    return {
      consumerGroup: requireResourceName(`consumers[${i}].consumerGroup`, c.consumerGroup),
      topics: subs.map((s: unknown, j: number) =>
        requireResourceName(
          `consumers[${i}].subscriptions[${j}]`,
          typeof s === 'object' && s !== null ? (s as Subscription).topic : s,
        ),
      ),
      registry: new HandlerRegistry(c.handlers, c.upcasters),
      unknownEventTypes: unknown,
    };
  });
}

export function resolveTopicEvents(value: unknown): Map<string, DoctorEventType[]> {
  const o = optionalObject('topicEvents', value);
  const out = new Map<string, DoctorEventType[]>();
  for (const [topic, list] of Object.entries(o)) {
    requireResourceName(`topicEvents key`, topic);
    if (!Array.isArray(list)) {
      throw new InvalidOptionError(`topicEvents.${topic}`, list, 'an array of { eventType, eventVersion }');
    }
    out.set(
      topic,
      list.map((e: unknown, i: number) => {
        const d = optionalObject(`topicEvents.${topic}[${i}]`, e);
        if (typeof d.eventType !== 'string' || d.eventType === '') {
          throw new InvalidOptionError(`topicEvents.${topic}[${i}].eventType`, d.eventType, 'an event type');
        }
        return {
          eventType: d.eventType,
          eventVersion: optionalInt(
            `topicEvents.${topic}[${i}].eventVersion`,
            d.eventVersion,
            1,
            1,
            1_000_000,
          ),
        };
      }),
    );
  }
  return out;
}
