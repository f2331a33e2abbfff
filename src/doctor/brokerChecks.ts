import type { TopicMessageType, TopicRoute } from '../broker/topicRoutes';
import type { ConfirmBy } from '../producer/options';
import { RocketMqTxError } from '../errors';
import { brokerHorizonMs, horizonText } from './databaseChecks';
import type { ResolvedDoctorOptions } from './options';
import { check, formatDuration, type DoctorCheck } from './report';

/** The message type each named topic must have, from the delivery it is named for. */
export function intendedTypes(o: ResolvedDoctorOptions): Map<string, TopicMessageType> {
  const out = new Map<string, TopicMessageType>();
  for (const t of o.outboxTopics) out.set(t, 'NORMAL');
  for (const t of o.fifoTopics) out.set(t, 'FIFO');
  for (const t of o.transactionTopics) out.set(t, 'TRANSACTION');
  return out;
}

const why: Record<string, string> = {
  TRANSACTION: 'transactional delivery sends half messages, which only a TRANSACTION topic accepts',
  FIFO: 'FIFO delivery (messageGroup = aggregateId) needs a FIFO topic',
  NORMAL:
    'outbox delivery sends normal messages (a TRANSACTION topic must be named with --transaction-topics)',
};

/**
 * The transactional topics served by more than one broker: the proxy runs in Cluster mode, where
 * it acknowledges a commit as soon as its one-way request to the broker is written. A commit lost
 * there (broker or proxy killed at that moment) leaves a half message whose checks can all miss
 * (the proxy or broker restarting, killed producers), and the broker discards it; an event the
 * producer confirmed on the proxy's OK is then never republished (docs/cluster.md).
 */
export function confirmByCheck(
  routes: readonly TopicRoute[],
  intended: Map<string, TopicMessageType>,
  confirmBy: ConfirmBy,
): DoctorCheck | undefined {
  const clustered = routes.flatMap((r) =>
    r.state === 'found' && intended.get(r.topic) === 'TRANSACTION' && r.brokers.length > 1
      ? [`${r.topic} (${r.brokers.join(', ')})`]
      : [],
  );
  if (clustered.length === 0) return undefined;
  const value = `transactional topics on several brokers: ${clustered.join('; ')}; confirmBy ${confirmBy}`;
  const threshold = "confirmBy 'delivery' behind a Cluster-mode proxy";
  return confirmBy === 'delivery'
    ? check('broker', 'broker.confirmBy', 'pass', value, { threshold })
    : check('broker', 'broker.confirmBy', 'warn', value, {
        threshold,
        advice:
          "run the producers with confirmBy: 'delivery' (and --confirm-by delivery here): a Cluster-mode proxy " +
          'acknowledges a commit before the broker applies it, and an event confirmed on that OK is lost if ' +
          'the commit dies with a broker or the proxy (docs/cluster.md)',
      });
}

/** The connection check, then one check per topic (and the confirmBy check on a cluster). */
export function brokerChecks(
  endpoints: string,
  result: { routes: TopicRoute[] } | { error: unknown },
  intended: Map<string, TopicMessageType>,
  confirmBy: ConfirmBy = 'endTransaction',
): DoctorCheck[] {
  if ('error' in result) {
    const err = result.error;
    const code = err instanceof RocketMqTxError ? err.code : 'BROKER_UNAVAILABLE';
    const message = err instanceof Error ? err.message : String(err);
    const advice =
      code === 'AUTHENTICATION_FAILED'
        ? 'fix ROCKETMQ_ACCESS_KEY / ROCKETMQ_ACCESS_SECRET (the ACL 2.0 user)'
        : code === 'TLS_FAILED'
          ? "fix --ssl / --ca-file or the proxy's certificate"
          : 'check --endpoints (the proxy gRPC port) and that the proxy runs';
    return [
      check('broker', 'broker.connection', 'fail', `${code}: ${message}`, { threshold: 'connects', advice }),
      ...[...intended.keys()].map((t) =>
        check('broker', `broker.topic.${t}`, 'skip', 'not checked', {
          advice: 'no connection to the broker',
        }),
      ),
    ];
  }
  const out = [
    check(
      'broker',
      'broker.connection',
      'pass',
      `connected to ${endpoints}, ${result.routes.length} topic route(s) read`,
    ),
  ];
  for (const r of result.routes) {
    const want = intended.get(r.topic) ?? 'NORMAL';
    const id = `broker.topic.${r.topic}`;
    const threshold = `exists, message type ${want}, writable`;
    if (r.state === 'not-found') {
      out.push(
        check('broker', id, 'fail', 'topic does not exist', {
          threshold,
          advice: `create it: mqadmin updateTopic -t ${r.topic} -c <cluster> -a +message.type=${want}`,
        }),
      );
    } else if (r.state === 'denied') {
      out.push(
        check('broker', id, 'fail', `${r.error.code}: ${r.error.message}`, {
          threshold,
          advice: `grant this user Pub (and Sub for consumers) on Topic:${r.topic} in the broker's ACL`,
        }),
      );
    } else if (r.state === 'unreadable') {
      out.push(
        check('broker', id, 'warn', `could not read the route: ${r.detail}`, {
          threshold,
          advice: 'check the topic with mqadmin topicStatus / the dashboard',
        }),
      );
    } else if (r.messageTypes.length === 0 || r.messageTypes.every((t) => t === 'UNSPECIFIED')) {
      out.push(
        check(
          'broker',
          id,
          'warn',
          `could not read the message type (the proxy's route names none; ${r.queues} queues)`,
          {
            threshold,
            advice: `check with mqadmin that its message.type is ${want}`,
          },
        ),
      );
    } else if (!r.messageTypes.includes(want)) {
      out.push(
        check('broker', id, 'fail', `message type ${r.messageTypes.join('/')}`, {
          threshold,
          advice: `${why[want] ?? ''}: recreate the topic with +message.type=${want}, or name it under the right flag`,
        }),
      );
    } else if (!r.writable) {
      out.push(
        check('broker', id, 'fail', `message type ${r.messageTypes.join('/')}, not writable`, {
          threshold,
          advice:
            'the topic (or its broker) is read-only: restore its permission (mqadmin updateTopicPerm -p 6)',
        }),
      );
    } else {
      out.push(
        check('broker', id, 'pass', `message type ${r.messageTypes.join('/')}, ${r.queues} queues`, {
          threshold,
        }),
      );
    }
  }
  const confirm = confirmByCheck(result.routes, intended, confirmBy);
  if (confirm) out.push(confirm);
  return out;
}

/** Checks of the stated options alone (no connection needed). */
export function optionChecks(o: ResolvedDoctorOptions): DoctorCheck[] {
  const out: DoctorCheck[] = [];
  const named = [...new Set([...o.transactionTopics, ...o.outboxTopics, ...o.fifoTopics])];
  if (named.length === 0) {
    out.push(
      check('options', 'options.delivery', 'skip', 'no topics named', {
        advice: 'name your topics (--transaction-topics, --outbox-topics, --fifo-topics) to check them',
      }),
    );
  } else {
    const txFifo = o.transactionTopics.filter((t) => o.fifoTopics.includes(t));
    const both = o.transactionTopics.filter((t) => o.outboxTopics.includes(t));
    const value =
      `transactional: ${o.transactionTopics.join(', ') || '-'}; outbox: ` +
      `${[...new Set([...o.outboxTopics, ...o.fifoTopics])].join(', ') || '-'}`;
    if (txFifo.length > 0) {
      out.push(
        check('options', 'options.delivery', 'fail', value, {
          threshold: 'a transactional topic is not FIFO',
          advice: `transactional messages cannot carry a message group: ${txFifo.join(', ')} cannot be both`,
        }),
      );
    } else {
      out.push(
        check('options', 'options.delivery', 'pass', value, {
          advice:
            both.length > 0
              ? `${both.join(', ')} also get outbox delivery: the relay must list them in --transaction-topics`
              : '',
        }),
      );
    }
  }

  out.push(
    check('options', 'options.outbox-fallback', 'pass', o.outboxFallback ? 'on' : 'off', {
      advice: o.outboxFallback
        ? 'a broker outage still commits (events NEW): run a relay for every transactional topic ' +
          '(rocketmq-tx relay --topics <t> --transaction-topics <t>)'
        : 'a broker outage fails transact() with BrokerUnavailableError (nothing commits)',
    }),
  );

  const horizon = brokerHorizonMs(o);
  const margin = 2 * o.brokerCheckIntervalMs;
  const dh = `discard horizon ${formatDuration(o.discardHorizonMs)}`;
  const dhThreshold = `> ${horizonText(o)} + 2 check intervals`;
  if (o.discardHorizonMs <= horizon) {
    out.push(
      check('options', 'options.discard-horizon', 'fail', dh, {
        threshold: dhThreshold,
        advice:
          'events would be republished while the broker still checks their half message (delivered twice); ' +
          `raise discardHorizonMs / --discard-horizon above ${formatDuration(horizon + margin)}`,
      }),
    );
  } else if (o.discardHorizonMs <= horizon + margin) {
    out.push(
      check('options', 'options.discard-horizon', 'warn', dh, {
        threshold: dhThreshold,
        advice: `little margin over the broker's last check: raise it above ${formatDuration(horizon + margin)}`,
      }),
    );
  } else {
    out.push(check('options', 'options.discard-horizon', 'pass', dh, { threshold: dhThreshold }));
  }

  const fenceMs = Math.max(1, Math.ceil(o.lockWaitTimeoutMs / 1000)) * 1000;
  const lw = `fence lock wait ${formatDuration(fenceMs)} (checkBack.lockWaitTimeoutMs ${o.lockWaitTimeoutMs} ms, whole seconds on MySQL)`;
  const lwThreshold =
    `<= the broker's transactionTimeOut (${formatDuration(o.brokerTxTimeoutMs)}) and ` +
    `<= half the check interval (${formatDuration(o.brokerCheckIntervalMs / 2)})`;
  if (fenceMs > o.brokerTxTimeoutMs) {
    out.push(
      check('options', 'options.lock-wait', 'fail', lw, {
        threshold: lwThreshold,
        advice:
          "a check-back may wait on the producer's row longer than the broker waits before it asks at all: " +
          'a producer transaction still running at its first check-back holds a DB connection of the ' +
          'check-back for longer than the broker gives a transaction; lower checkBack.lockWaitTimeoutMs ' +
          "below the broker's transactionTimeOut, or raise transactionTimeOut",
      }),
    );
  } else if (fenceMs >= o.brokerCheckIntervalMs) {
    out.push(
      check('options', 'options.lock-wait', 'fail', lw, {
        threshold: lwThreshold,
        advice:
          'a check-back would still wait when the broker asks again: check-backs pile up on DB connections; ' +
          'lower checkBack.lockWaitTimeoutMs (default 2000)',
      }),
    );
  } else if (fenceMs > o.brokerCheckIntervalMs / 2) {
    out.push(
      check('options', 'options.lock-wait', 'warn', lw, {
        threshold: lwThreshold,
        advice: 'keep the fence lock wait well under the check interval: lower checkBack.lockWaitTimeoutMs',
      }),
    );
  } else {
    out.push(check('options', 'options.lock-wait', 'pass', lw, { threshold: lwThreshold }));
  }
  return out;
}
