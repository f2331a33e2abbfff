import {
  formatChaosReport,
  runProducerChaos,
  type ProducerChaosOptions,
} from '../testing/chaos/runProducerChaos';
import {
  formatConsumerChaosReport,
  runConsumerChaos,
  type ConsumerChaosOptions,
} from '../testing/chaos/runConsumerChaos';
import {
  CONSUMER_WINDOWS,
  PRODUCER_WINDOWS,
  type ConsumerWindow,
  type ProducerWindow,
} from '../testing/chaos/protocol';
import {
  boolFlag,
  COMMON_FLAGS,
  durationFlag,
  intFlag,
  invalid,
  JSON_FLAG,
  stringFlag,
  UsageError,
  type Command,
} from './args';
import { resolveBrokerTarget } from './connection';
import { printJson } from './output';

const MS = (maxMs: number) => ({ minMs: 0, maxMs });

export const chaosFlags = {
  consumer: {
    type: 'boolean',
    description:
      'kill consumer processes instead (your IdempotentConsumer: windows random, in-handler, before-ack) and check every event applied exactly once',
  },
  module: {
    type: 'string',
    value: '<path>',
    description:
      'your module (.js, or .ts with ts-node installed): dataSource(), transaction(producer, { topic, sequence }), optional prepare(dataSource); with --consumer: dataSource(), consumerOptions(), event(n, topic), effects(dataSource, eventIds), optional prepare(dataSource)',
  },
  topic: {
    type: 'string',
    value: '<topic>',
    description:
      'the TRANSACTION topic your transaction publishes to (required); with --consumer, the runner publishes your events there',
  },
  'consumer-group': {
    type: 'string',
    value: '<group>',
    description: 'with --consumer: consumer group of the run (default a fresh rmqtx_chaos_c_<id>)',
  },
  'events-per-round': {
    type: 'string',
    value: '<n>',
    description: 'with --consumer: events published before each process is forked (default 5)',
  },
  endpoints: {
    type: 'string',
    value: '<host:port>',
    description: 'RocketMQ 5 proxy gRPC endpoints (env ROCKETMQ_ENDPOINTS; default 127.0.0.1:8081)',
  },
  namespace: { type: 'string', value: '<name>', description: 'RocketMQ namespace (env ROCKETMQ_NAMESPACE)' },
  'producer-group': {
    type: 'string',
    value: '<group>',
    description: 'producer group of the run (default a fresh rmqtx_chaos_<id>, so runs do not mix)',
  },
  rounds: { type: 'string', value: '<n>', description: 'SIGKILLs in all (default 50)' },
  seed: {
    type: 'string',
    value: '<n>',
    description: 'seed of the kill schedule (default time-based; printed)',
  },
  windows: {
    type: 'string',
    value: '<w1,w2>',
    description: `windows to kill in, in turn (default all: ${PRODUCER_WINDOWS.join(', ')}; with --consumer ${CONSUMER_WINDOWS.join(', ')})`,
  },
  parallel: { type: 'string', value: '<n>', description: 'processes alive at once (default 2)' },
  concurrency: {
    type: 'string',
    value: '<n>',
    description: 'transactions in flight per process (default 2)',
  },
  'window-timeout': {
    type: 'string',
    value: '<duration>',
    description: 'kill anyway when a named window is not reached within this (default 20s)',
  },
  'check-horizon': {
    type: 'string',
    value: '<duration>',
    description:
      "wait at least this after the last kill: your broker's transactionTimeOut + checkMax x checkInterval (default 20s)",
  },
  'settle-timeout': {
    type: 'string',
    value: '<duration>',
    description: 'stop waiting for delivery after this long without progress (default 2m)',
  },
  'recovery-horizon': {
    type: 'string',
    value: '<duration>',
    description:
      "the survivor's discard recovery horizon: republish committed events whose half message the broker discarded (default check horizon + 5s)",
  },
  ...JSON_FLAG,
  ...COMMON_FLAGS,
} as const satisfies Command['flags'];

function windowsFlag<W extends string>(raw: string | undefined, allowed: readonly W[]): W[] | undefined {
  if (raw === undefined) return undefined;
  const list = raw.split(',').map((w) => w.trim());
  const bad = list.find((w) => !allowed.includes(w as W));
  if (bad !== undefined || new Set(list).size !== list.length) {
    throw invalid('windows', raw, `distinct windows among ${allowed.join(', ')}`);
  }
  return list as W[];
}

const PRODUCER_ONLY = ['producer-group', 'concurrency', 'check-horizon', 'recovery-horizon'] as const;
const CONSUMER_ONLY = ['consumer-group', 'events-per-round'] as const;

export const chaosCommand: Command = {
  name: 'chaos',
  usage: 'rocketmq-tx chaos [--consumer] --module <path> --topic <topic> [--rounds 50] [--seed n] [flags]',
  description:
    'Crash-window runner: forks processes that run your business transaction in a loop and SIGKILLs\n' +
    'each at random or inside a named window (after-half, in-work, after-commit, check-back), keeps a\n' +
    'survivor producer answering check-backs, counts every delivery with a raw consumer, and prints\n' +
    'committed / delivered / lost / phantom / duplicates per window. Exit 1 on any loss or phantom.\n' +
    'With --consumer: kills your IdempotentConsumer processes (random, in-handler, before-ack) while\n' +
    'the runner publishes your events, then checks each event applied exactly once (exit 1 if not).\n' +
    'Database: whatever your module opens. Progress goes to stderr.',
  flags: chaosFlags,
  async run({ flags }, { io }) {
    const moduleFlag = stringFlag(flags, 'module');
    if (moduleFlag === undefined) throw new UsageError('--module is required');
    const topic = stringFlag(flags, 'topic');
    if (topic === undefined) throw new UsageError('--topic is required');
    const broker = resolveBrokerTarget(flags, io.env);
    const rounds = intFlag(flags, 'rounds', { min: 1, max: 1_000_000 });
    const seed = intFlag(flags, 'seed', { min: 0, max: 2 ** 32 - 1 });
    const parallel = intFlag(flags, 'parallel', { min: 1, max: 64 });
    const windowTimeoutMs = durationFlag(flags, 'window-timeout', { minMs: 100, maxMs: 3_600_000 });
    const settleTimeoutMs = durationFlag(flags, 'settle-timeout', { minMs: 1000, maxMs: 86_400_000 });
    const json = boolFlag(flags, 'json');
    const common = {
      module: moduleFlag,
      endpoints: broker.endpoints,
      ...(broker.namespace !== undefined ? { namespace: broker.namespace } : {}),
      topic,
      ...(rounds !== undefined ? { rounds } : {}),
      ...(seed !== undefined ? { seed } : {}),
      ...(parallel !== undefined ? { parallel } : {}),
      ...(windowTimeoutMs !== undefined ? { windowTimeoutMs } : {}),
      ...(settleTimeoutMs !== undefined ? { settleTimeoutMs } : {}),
      onProgress: (line: string) => io.stderr.write(`${line}\n`),
    };
    const consumer = boolFlag(flags, 'consumer');
    const misplaced = (consumer ? PRODUCER_ONLY : CONSUMER_ONLY).find((f) => flags[f] !== undefined);
    if (misplaced !== undefined) {
      throw new UsageError(`--${misplaced} ${consumer ? 'is not used with' : 'needs'} --consumer`);
    }
    if (consumer) {
      const group = stringFlag(flags, 'consumer-group');
      const windows = windowsFlag(stringFlag(flags, 'windows'), CONSUMER_WINDOWS);
      const eventsPerRound = intFlag(flags, 'events-per-round', { min: 1, max: 1000 });
      const options: ConsumerChaosOptions = {
        ...common,
        ...(group !== undefined ? { consumerGroup: group } : {}),
        ...(windows ? { windows: windows as ConsumerWindow[] } : {}),
        ...(eventsPerRound !== undefined ? { eventsPerRound } : {}),
      };
      const report = await runConsumerChaos(options);
      if (json) printJson(io, report);
      else io.stdout.write(`${formatConsumerChaosReport(report)}\n`);
      return report.ok ? 0 : 1;
    }
    const group = stringFlag(flags, 'producer-group');
    const windows = windowsFlag(stringFlag(flags, 'windows'), PRODUCER_WINDOWS);
    const concurrency = intFlag(flags, 'concurrency', { min: 1, max: 64 });
    const checkHorizonMs = durationFlag(flags, 'check-horizon', MS(86_400_000));
    const recoveryHorizonMs = durationFlag(flags, 'recovery-horizon', { minMs: 1000, maxMs: 7 * 86_400_000 });
    const options: ProducerChaosOptions = {
      ...common,
      ...(group !== undefined ? { producerGroup: group } : {}),
      ...(windows ? { windows: windows as ProducerWindow[] } : {}),
      ...(concurrency !== undefined ? { concurrency } : {}),
      ...(checkHorizonMs !== undefined ? { checkHorizonMs } : {}),
      ...(recoveryHorizonMs !== undefined ? { recoveryHorizonMs } : {}),
    };
    const report = await runProducerChaos(options);
    if (json) printJson(io, report);
    else io.stdout.write(`${formatChaosReport(report)}\n`);
    return report.ok ? 0 : 1;
  },
};
