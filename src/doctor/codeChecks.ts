import type { ResolvedDoctorOptions } from './options';
import { check, type DoctorCheck } from './report';

/** Code-level checks: what the stated producer and consumer options do with the topics' events. */
export function codeChecks(o: ResolvedDoctorOptions): DoctorCheck[] {
  return [producerTopicsCheck(o), ...handlerChecks(o)];
}

/** Every transactional topic among the producer's declared `topics` (check-backs arrive per topic). */
export function producerTopicsCheck(o: ResolvedDoctorOptions): DoctorCheck {
  if (o.producerTopics === undefined) {
    return check('options', 'options.producer-topics', 'skip', 'producer topics not given', {
      advice:
        "pass the producer's `topics` (--producer-topics) to check every transactional topic is declared",
    });
  }
  const missing = o.transactionTopics.filter((t) => !o.producerTopics!.includes(t));
  const value = `declared: ${o.producerTopics.join(', ') || '-'}`;
  const threshold = `every transactional topic (${o.transactionTopics.join(', ') || '-'})`;
  if (missing.length > 0) {
    return check('options', 'options.producer-topics', 'fail', `${value}; missing ${missing.join(', ')}`, {
      threshold,
      advice:
        'the proxy routes check-backs to the producers that declared the topic at start: add them to the ' +
        "producer's `topics`, or their in-doubt half messages are never asked about (discarded, then republished late)",
    });
  }
  return check('options', 'options.producer-topics', 'pass', value, { threshold });
}

/**
 * Per consumer: every (eventType, eventVersion) each subscribed topic carries (topicEvents) reaches
 * a handler, directly or through its upcaster chain.
 */
export function handlerChecks(o: ResolvedDoctorOptions): DoctorCheck[] {
  return o.consumers.map((c) => {
    const id = `options.handlers.${c.consumerGroup}`;
    const carried = c.topics.flatMap((topic) =>
      (o.topicEvents.get(topic) ?? []).map((e) => ({ topic, ...e })),
    );
    if (carried.length === 0) {
      return check('options', id, 'skip', `topics ${c.topics.join(', ')}: carried events not named`, {
        advice: 'name the event types and versions each topic carries (topicEvents) to check the handlers',
      });
    }
    const handled: string[] = [];
    const unhandled: string[] = [];
    const unknownTypes: string[] = [];
    const seen = new Set<string>();
    for (const e of carried) {
      const key = `${e.eventType} v${e.eventVersion}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const r = c.registry.route(e.eventType, e.eventVersion);
      if (r.kind === 'handler') {
        handled.push(r.upcasts === 0 ? key : `${key} -> v${r.handledVersion} (${r.upcasts} upcaster(s))`);
      } else if (r.kind === 'unknown-type') {
        unknownTypes.push(`${key} on ${e.topic}`);
      } else {
        unhandled.push(`${key} on ${e.topic} (handlers for v${r.handled.join(', v')}, no upcaster chain)`);
      }
    }
    const parts = [
      handled.length > 0 ? `handled: ${handled.join(', ')}` : '',
      unknownTypes.length > 0 ? `no handler: ${unknownTypes.join(', ')}` : '',
      unhandled.length > 0 ? `no handler for the version: ${unhandled.join(', ')}` : '',
    ].filter(Boolean);
    const value = parts.join('; ');
    const threshold = 'every carried event type and version reaches a handler (directly or by upcasters)';
    if (unhandled.length > 0 || (unknownTypes.length > 0 && c.unknownEventTypes === 'retry')) {
      return check('options', id, 'fail', value, {
        threshold,
        advice:
          "such messages are redelivered until the group's retry maximum, then dead-lettered: register a " +
          'handler for the type and version, or an upcaster (eventType, fromVersion) from each older version' +
          (unknownTypes.length > 0
            ? "; or set unknownEventTypes: 'ignore' for types this group does not need"
            : ''),
      });
    }
    if (unknownTypes.length > 0) {
      return check('options', id, 'warn', value, {
        threshold,
        advice: "unknownEventTypes: 'ignore' acks them unhandled: make sure this group does not need them",
      });
    }
    return check('options', id, 'pass', value, { threshold });
  });
}
