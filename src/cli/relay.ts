import { BrokerUnavailableError } from '../errors';
import { OutboxRelay, type OutboxRelayOptions, type RelayStats } from '../index';
import {
  boolFlag,
  COMMON_FLAGS,
  DB_FLAGS,
  durationFlag,
  FlagBindings,
  intFlag,
  JSON_FLAG,
  stringFlag,
  topicsFlag,
  UsageError,
  type Command,
  type CommandContext,
  type ParsedFlags,
} from './args';
import {
  BROKER_FLAGS,
  connect,
  createDataSource,
  requireTables,
  resolveBrokerTarget,
  resolveDbTarget,
} from './connection';
import { CliError, describeError, note, printJson, stderrLogger, type Io } from './output';

const ANY_MS = { minMs: 0, maxMs: Number.MAX_SAFE_INTEGER };

export const relayFlags = {
  ...DB_FLAGS,
  ...BROKER_FLAGS,
  topics: { type: 'string', multiple: true, value: '<t1,t2>', description: 'topics to deliver (required)' },
  'transaction-topics': {
    type: 'string',
    multiple: true,
    value: '<t1,t2>',
    description: 'those of --topics whose message type is TRANSACTION (half message + commit)',
  },
  'fifo-topics': {
    type: 'string',
    multiple: true,
    value: '<t1,t2>',
    description: 'those of --topics whose message type is FIFO (messageGroup = aggregateId)',
  },
  'batch-size': { type: 'string', value: '<n>', description: 'rows per claim transaction (default 100)' },
  'batches-in-flight': {
    type: 'string',
    value: '<n>',
    description: 'claimed batches sent at once; the next claim overlaps the sends (default 2)',
  },
  'poll-interval': {
    type: 'string',
    value: '<duration>',
    description: 'wait after a short batch (default 500ms)',
  },
  lease: { type: 'string', value: '<duration>', description: 'lease of a claimed row (default 30s)' },
  'max-attempts': {
    type: 'string',
    value: '<n>',
    description: 'tries before a row becomes DEAD (default 10)',
  },
  'backoff-base': { type: 'string', value: '<duration>', description: 'retry backoff base (default 1s)' },
  'backoff-max': { type: 'string', value: '<duration>', description: 'retry backoff cap (default 5m)' },
  'backoff-jitter': { type: 'string', value: '<duration>', description: 'retry backoff jitter (default 1s)' },
  'discard-horizon': {
    type: 'string',
    value: '<duration>',
    description: 'republish unconfirmed IN_FLIGHT rows older than this (default 20m)',
  },
  'reconcile-interval': {
    type: 'string',
    value: '<duration>',
    description: 'how often the discard reconciliation runs (default 10s)',
  },
  'no-discard-reconcile': { type: 'boolean', description: 'do not run the discard reconciliation' },
  'relay-id': { type: 'string', value: '<id>', description: 'lease owner id (default relay-<pid>-<random>)' },
  'request-timeout': {
    type: 'string',
    value: '<duration>',
    description: 'broker request timeout (default 3s)',
  },
  'start-timeout': {
    type: 'string',
    value: '<duration>',
    description: 'broker start-up limit (default 15s)',
  },
  'shutdown-timeout': {
    type: 'string',
    value: '<duration>',
    description: 'how long a stop waits for in-flight sends (default 10s)',
  },
  'pool-size': { type: 'string', value: '<n>', description: 'database connections (default 10)' },
  'progress-interval': {
    type: 'string',
    value: '<duration>',
    description: 'progress line on stderr every <duration>; 0s: none (default 30s)',
  },
  ...JSON_FLAG,
  ...COMMON_FLAGS,
} as const satisfies Command['flags'];

export interface RelayPlan {
  options: Omit<OutboxRelayOptions, 'dataSource' | 'logger'>;
  bindings: FlagBindings;
  poolSize: number;
  progressIntervalMs: number;
}

/** Flags to OutboxRelay options (the relay validates ranges; its errors are mapped back to flags). */
export function planRelay(flags: ParsedFlags, env: Record<string, string | undefined>): RelayPlan {
  const b = new FlagBindings();
  const topics = topicsFlag(flags, 'topics');
  if (topics.length === 0) throw new UsageError('--topics is required: the topics this relay delivers');
  const broker = resolveBrokerTarget(flags, env);
  const transactionTopics = topicsFlag(flags, 'transaction-topics');
  const fifoTopics = topicsFlag(flags, 'fifo-topics');
  for (const [flag, list] of [
    ['transaction-topics', transactionTopics],
    ['fifo-topics', fifoTopics],
  ] as const) {
    const stray = list.find((t) => !topics.includes(t));
    if (stray !== undefined) {
      throw new UsageError(`invalid --${flag} "${stray}": expected one of --topics (${topics.join(', ')})`);
    }
  }
  const both = transactionTopics.find((t) => fifoTopics.includes(t));
  if (both !== undefined) {
    throw new UsageError(`invalid --fifo-topics "${both}": a topic cannot be both TRANSACTION and FIFO`);
  }
  const options: RelayPlan['options'] = {
    endpoints: broker.endpoints,
    topics,
    transactionTopics,
    fifoTopics,
    ...(broker.caFile !== undefined ? { tls: { caFile: broker.caFile } } : { sslEnabled: broker.sslEnabled }),
    ...(broker.namespace !== undefined ? { namespace: broker.namespace } : {}),
    ...(broker.credentials ? { credentials: broker.credentials } : {}),
  };
  const set = (
    option: string,
    flag: string,
    value: number | string | undefined,
    kind: 'value' | 'duration',
  ) => {
    if (value === undefined) return;
    (options as Record<string, unknown>)[option] = value;
    b.bind(option, flag, stringFlag(flags, flag), kind);
  };
  set('batchSize', 'batch-size', intFlag(flags, 'batch-size'), 'value');
  set('batchesInFlight', 'batches-in-flight', intFlag(flags, 'batches-in-flight'), 'value');
  set('maxAttempts', 'max-attempts', intFlag(flags, 'max-attempts'), 'value');
  set('pollIntervalMs', 'poll-interval', durationFlag(flags, 'poll-interval', ANY_MS), 'duration');
  set('leaseMs', 'lease', durationFlag(flags, 'lease', ANY_MS), 'duration');
  set('discardHorizonMs', 'discard-horizon', durationFlag(flags, 'discard-horizon', ANY_MS), 'duration');
  set(
    'reconcileIntervalMs',
    'reconcile-interval',
    durationFlag(flags, 'reconcile-interval', ANY_MS),
    'duration',
  );
  set('requestTimeoutMs', 'request-timeout', durationFlag(flags, 'request-timeout', ANY_MS), 'duration');
  set('startTimeoutMs', 'start-timeout', durationFlag(flags, 'start-timeout', ANY_MS), 'duration');
  set('shutdownTimeoutMs', 'shutdown-timeout', durationFlag(flags, 'shutdown-timeout', ANY_MS), 'duration');
  set('relayId', 'relay-id', stringFlag(flags, 'relay-id'), 'value');
  const backoff: Record<string, number> = {};
  for (const [key, flag] of [
    ['baseMs', 'backoff-base'],
    ['maxDelayMs', 'backoff-max'],
    ['jitterMs', 'backoff-jitter'],
  ] as const) {
    const ms = durationFlag(flags, flag, ANY_MS);
    if (ms !== undefined) {
      backoff[key] = ms;
      b.bind(`backoff.${key}`, flag, stringFlag(flags, flag), 'duration');
    }
  }
  if (Object.keys(backoff).length > 0) options.backoff = backoff;
  if (broker.caFile !== undefined) b.bind('tls.caFile', 'ca-file', broker.caFile);
  if (boolFlag(flags, 'no-discard-reconcile')) options.reconcileDiscarded = false;
  return {
    options,
    bindings: b,
    poolSize: intFlag(flags, 'pool-size', { min: 1, max: 200 }) ?? 10,
    progressIntervalMs:
      durationFlag(flags, 'progress-interval', { minMs: 0, maxMs: 24 * 3_600_000 }) ?? 30_000,
  };
}

function statsLine(s: RelayStats, last: RelayStats | undefined): string {
  const d = (k: keyof RelayStats) => (last ? ` (+${s[k] - last[k]})` : '');
  return (
    `claimed ${s.claimed}${d('claimed')}, sent ${s.sent}${d('sent')}, failed ${s.failed}${d('failed')}, ` +
    `dead ${s.dead}${d('dead')}, republished ${s.republished}${d('republished')}, ` +
    `store errors ${s.storeErrors}${d('storeErrors')}`
  );
}

/** Resolves with the first signal; a second one calls onSecond. */
function waitForStop(ctx: CommandContext, onSecond: (signal: string) => void) {
  let first: string | undefined;
  let resolve!: (signal: string) => void;
  const stopped = new Promise<string>((r) => (resolve = r));
  const remove = ctx.onSignal((signal) => {
    if (first === undefined) {
      first = signal;
      resolve(signal);
    } else onSecond(signal);
  });
  return { stopped, remove };
}

async function runRelay(io: Io, ctx: CommandContext, flags: ParsedFlags): Promise<number> {
  const plan = planRelay(flags, io.env);
  const target = resolveDbTarget(flags, io.env);
  const verbose = boolFlag(flags, 'verbose');
  const logger = stderrLogger(io, verbose);
  let forced: ((code: number) => void) | undefined;
  const forcedExit = new Promise<number>((r) => (forced = r));
  const { stopped, remove } = waitForStop(ctx, (signal) => {
    note(io, `relay: second ${signal}: exiting now; rows still leased are retried after their lease`);
    forced?.(1);
  });
  try {
    const ds = createDataSource(target, { poolSize: plan.poolSize });
    let relay: OutboxRelay;
    try {
      relay = new OutboxRelay({ ...plan.options, dataSource: ds, logger });
    } catch (err) {
      throw plan.bindings.translate(err) ?? err;
    }
    await connect(target, ds);
    try {
      await requireTables(target, ds, ['outbox_event', 'tx_record']);
      const started = await Promise.race([relay.start().then(() => true), stopped.then(() => false)]).catch(
        (err: unknown) => {
          if (err instanceof BrokerUnavailableError) {
            throw new CliError(
              `cannot reach the RocketMQ proxy at ${plan.options.endpoints}: ` +
                describeError(err).replace(`RocketMQ proxy at ${plan.options.endpoints} `, ''),
              err,
            );
          }
          throw err;
        },
      );
      if (!started) {
        note(io, 'relay: stopped before the broker connection was up');
        await relay.shutdown().catch(() => undefined);
        return 0;
      }
      note(
        io,
        `relay ${relay.relayId} started: topics ${plan.options.topics.join(',')}, ` +
          `proxy ${plan.options.endpoints}, database ${target.display}`,
      );
      let last: RelayStats | undefined;
      const timer =
        plan.progressIntervalMs > 0
          ? setInterval(() => {
              const now = { ...relay.stats };
              note(io, `relay ${relay.relayId}: ${statsLine(now, last)}`);
              last = now;
            }, plan.progressIntervalMs)
          : undefined;
      const signal = await stopped;
      if (timer) clearInterval(timer);
      note(io, `relay ${relay.relayId}: ${signal}: no new claims; finishing in-flight sends`);
      // The rows are finished when the loop is; a broker client that will not close (proxy down) is only reported.
      const closed = relay.shutdown().then(
        () => 0,
        (err: unknown) => {
          note(io, `relay ${relay.relayId}: closing the broker client failed: ${describeError(err)}`);
          return 0;
        },
      );
      const code = await Promise.race([closed, forcedExit]);
      if (code !== 0) return code;
      note(io, `relay ${relay.relayId} stopped: ${statsLine(relay.stats, undefined)}`);
      if (boolFlag(flags, 'json'))
        printJson(io, { relayId: relay.relayId, stopped: signal, stats: relay.stats });
      return 0;
    } finally {
      await ds.destroy().catch(() => undefined);
    }
  } finally {
    remove();
  }
}

export const relayCommand: Command = {
  name: 'relay',
  usage: 'rocketmq-tx relay --topics <t1,t2> [flags]',
  description:
    'Delivers NEW outbox_event rows of the given topics until SIGINT or SIGTERM. On the first signal it\n' +
    'stops claiming, finishes the sends in flight (bounded by --shutdown-timeout), closes the broker and\n' +
    'database connections and exits 0; a second signal exits 1 at once. A progress line goes to stderr\n' +
    'every --progress-interval. Broker credentials: ROCKETMQ_ACCESS_KEY / ROCKETMQ_ACCESS_SECRET.',
  flags: relayFlags,
  run: (parsed, ctx) => runRelay(ctx.io, ctx, parsed.flags),
};
