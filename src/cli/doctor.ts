import { InvalidOptionError, type GrantComponent } from '../index';
import { runDoctor } from '../doctor/runDoctor';
import { resolveDoctorOptions, type DoctorOptions } from '../doctor/options';
import { buildReport, check, DOCTOR_GROUPS, type DoctorReport } from '../doctor/report';
import { GRANT_COMPONENTS } from '../store/typeorm/grants';
import {
  boolFlag,
  COMMON_FLAGS,
  DB_FLAGS,
  durationFlag,
  FlagBindings,
  intFlag,
  invalid,
  JSON_FLAG,
  stringFlag,
  topicsFlag,
  type Command,
  type ParsedFlags,
} from './args';
import {
  BROKER_FLAGS,
  createDataSource,
  databaseError,
  resolveBrokerTarget,
  resolveDbTarget,
} from './connection';
import { describeError, maskSecrets, note, printJson, renderTable, stderrLogger } from './output';

const DAY = 86_400_000;

export const doctorFlags = {
  ...DB_FLAGS,
  ...BROKER_FLAGS,
  component: {
    type: 'string',
    multiple: true,
    value: '<c1,c2>',
    description: `the components this database user runs, to compare its grants: ${GRANT_COMPONENTS.join(', ')}`,
  },
  'transaction-topics': {
    type: 'string',
    multiple: true,
    value: '<t1,t2>',
    description: 'topics sent with transactional delivery (must be TRANSACTION topics)',
  },
  'outbox-topics': {
    type: 'string',
    multiple: true,
    value: '<t1,t2>',
    description: 'topics delivered only by the outbox relay (must be NORMAL topics)',
  },
  'fifo-topics': {
    type: 'string',
    multiple: true,
    value: '<t1,t2>',
    description: 'FIFO topics (outbox delivery, messageGroup = aggregateId)',
  },
  namesrv: {
    type: 'string',
    value: '<host:port>',
    description:
      "NameServer (env ROCKETMQ_NAMESRV): reads the broker's transactional settings, consumer groups' retry maximum and DLQ depth",
  },
  'producer-topics': {
    type: 'string',
    multiple: true,
    value: '<t1,t2>',
    description: "the producer's `topics` (every transactional topic must be declared)",
  },
  'consumer-groups': {
    type: 'string',
    multiple: true,
    value: '<g1,g2>',
    description: 'consumer groups whose retry maximum and DLQ depth are read (with --namesrv)',
  },
  'max-dlq': {
    type: 'string',
    value: '<n>',
    description: "messages in a consumer group's DLQ above which it warns (default 0)",
  },
  'outbox-fallback': { type: 'boolean', description: 'the producer runs with outboxFallback: true' },
  'lock-wait': {
    type: 'string',
    value: '<duration>',
    description: "the producer's checkBack.lockWaitTimeoutMs (default 2s)",
  },
  'confirm-by': {
    type: 'string',
    value: '<endTransaction|delivery>',
    description: "the producer's confirmBy (default endTransaction)",
  },
  'discard-horizon': {
    type: 'string',
    value: '<duration>',
    description: 'the discard horizon of the producer / relay (default 20m)',
  },
  'broker-check-interval-ms': {
    type: 'string',
    value: '<n>',
    description: "the broker's transactionCheckInterval in ms (default 30000, RocketMQ's)",
  },
  'broker-check-max': {
    type: 'string',
    value: '<n>',
    description: "the broker's transactionCheckMax (default 15)",
  },
  'broker-tx-timeout-ms': {
    type: 'string',
    value: '<n>',
    description: "the broker's transactionTimeOut in ms (default 6000)",
  },
  'max-backlog': {
    type: 'string',
    value: '<n>',
    description: 'NEW outbox rows above which the backlog warns (default 1000)',
  },
  'max-undelivered-age': {
    type: 'string',
    value: '<duration>',
    description: 'oldest undelivered event age above which it fails (default discard horizon + 10m)',
  },
  'max-dead': {
    type: 'string',
    value: '<n>',
    description: 'DEAD outbox rows above which it fails (default 0)',
  },
  retention: {
    type: 'string',
    value: '<duration>',
    description: 'your retention (archive --older-than); checks that archival keeps up',
  },
  'retention-grace': {
    type: 'string',
    value: '<duration>',
    description: 'how far past --retention the oldest SENT row may be (default 1d)',
  },
  'migrations-table': {
    type: 'string',
    value: '<name>',
    description: "with --component migrations: TypeORM's migrationsTableName (default migrations)",
  },
  archive: {
    type: 'boolean',
    description: 'outbox_event_archive must exist (default: checked when it exists)',
  },
  'request-timeout': {
    type: 'string',
    value: '<duration>',
    description: 'timeout of each broker route query (default 3s)',
  },
  ...JSON_FLAG,
  ...COMMON_FLAGS,
} as const satisfies Command['flags'];

function components(flags: ParsedFlags): GrantComponent[] {
  const v = flags.component;
  if (v === undefined) return [];
  const out: GrantComponent[] = [];
  for (const raw of Array.isArray(v) ? v : [String(v)]) {
    for (const c of raw.split(',').map((s) => s.trim())) {
      if (!(GRANT_COMPONENTS as readonly string[]).includes(c)) {
        throw invalid('component', raw, `comma-separated components: ${GRANT_COMPONENTS.join(', ')}`);
      }
      if (!out.includes(c as GrantComponent)) out.push(c as GrantComponent);
    }
  }
  return out;
}

/** Flags to DoctorOptions (without the DataSource); every value checked, bad ones name the flag. */
export function doctorOptions(
  flags: ParsedFlags,
  env: Record<string, string | undefined>,
  bindings: FlagBindings,
): DoctorOptions {
  const int = (name: string, min: number, max: number) => intFlag(flags, name, { min, max });
  const dur = (name: string, minMs: number, maxMs: number) => durationFlag(flags, name, { minMs, maxMs });
  const broker = resolveBrokerTarget(flags, env);
  const requestTimeoutMs = dur('request-timeout', 100, 60_000);
  bindings.bind('tls.caFile', 'ca-file', stringFlag(flags, 'ca-file'));
  bindings.bind('migrationsTableName', 'migrations-table', stringFlag(flags, 'migrations-table'));
  const nameServer = stringFlag(flags, 'namesrv') ?? (env.ROCKETMQ_NAMESRV || undefined);
  bindings.bind('broker.nameServer', 'namesrv', nameServer);
  const confirmBy = stringFlag(flags, 'confirm-by');
  bindings.bind('confirmBy', 'confirm-by', confirmBy);
  const producerTopics =
    flags['producer-topics'] === undefined ? undefined : topicsFlag(flags, 'producer-topics');
  const thresholds = {
    maxBacklog: int('max-backlog', 0, 1_000_000_000),
    maxUndeliveredAgeMs: dur('max-undelivered-age', 1000, 30 * DAY),
    maxDead: int('max-dead', 0, 1_000_000_000),
    maxDlqDepth: int('max-dlq', 0, 1_000_000_000),
    retentionMs: dur('retention', 60_000, 3650 * DAY),
    retentionGraceMs: dur('retention-grace', 0, 365 * DAY),
  };
  const options = {
    components: components(flags),
    ...(boolFlag(flags, 'archive') ? { archive: true } : {}),
    migrationsTableName: stringFlag(flags, 'migrations-table'),
    broker: {
      endpoints: broker.endpoints,
      ...(broker.namespace !== undefined ? { namespace: broker.namespace } : {}),
      ...(broker.credentials ? { credentials: broker.credentials } : {}),
      ...(broker.caFile !== undefined
        ? { tls: { caFile: broker.caFile } }
        : broker.sslEnabled
          ? { tls: true }
          : {}),
      ...(requestTimeoutMs !== undefined ? { requestTimeoutMs } : {}),
      ...(nameServer !== undefined ? { nameServer } : {}),
    },
    producerTopics,
    consumerGroups: topicsFlag(flags, 'consumer-groups', 'group'),
    transactionTopics: topicsFlag(flags, 'transaction-topics'),
    outboxTopics: topicsFlag(flags, 'outbox-topics'),
    fifoTopics: topicsFlag(flags, 'fifo-topics'),
    outboxFallback: boolFlag(flags, 'outbox-fallback'),
    lockWaitTimeoutMs: dur('lock-wait', 1, 60_000),
    confirmBy: confirmBy as DoctorOptions['confirmBy'],
    discardHorizonMs: dur('discard-horizon', 1000, 7 * DAY),
    brokerCheckIntervalMs: int('broker-check-interval-ms', 100, DAY),
    brokerCheckMax: int('broker-check-max', 1, 1000),
    brokerTxTimeoutMs: int('broker-tx-timeout-ms', 100, DAY),
    thresholds: Object.fromEntries(Object.entries(thresholds).filter(([, v]) => v !== undefined)),
  };
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as DoctorOptions;
}

/** The report as one table per checklist item, and a summary line. */
export function renderDoctor(report: DoctorReport): string {
  const out: string[] = [`rocketmq-tx doctor at ${report.generatedAt}\n`];
  for (const group of DOCTOR_GROUPS) {
    const rows = report.checks.filter((c) => c.group === group);
    if (rows.length === 0) continue;
    out.push(`== ${group}`);
    out.push(
      renderTable(
        ['status', 'check', 'value', 'threshold', 'what to do'],
        rows.map((c) => [c.status.toUpperCase(), c.id, c.value, c.threshold || '-', c.advice || '-']),
      ),
    );
  }
  const n = report.counts;
  out.push(
    `${report.status.toUpperCase()}: ${n.pass} pass, ${n.warn} warn, ${n.fail} fail, ${n.skip} skipped ` +
      `(exit ${report.exitCode})\n`,
  );
  return maskSecrets(out.join('\n'));
}

export const doctorCommand: Command = {
  name: 'doctor',
  usage:
    'rocketmq-tx doctor [--component <c>] [--transaction-topics <t>] [--outbox-topics <t>] [--fifo-topics <t>] [flags] [--json]',
  description:
    'Checks a live deployment against the production checklist: the SDK tables and indexes, the\n' +
    "user's grants, isolation level and lock-wait timeout, outbox backlog, DEAD rows, in-doubt\n" +
    'transactions, retention, clock skew, the topics on the broker and their message types, and the\n' +
    'stated options. Read-only. Exit 0 all pass, 1 a warning, 2 a failure (or a bad flag).',
  flags: doctorFlags,
  async run(parsed, { io }) {
    const bindings = new FlagBindings();
    const options = doctorOptions(parsed.flags, io.env, bindings);
    try {
      resolveDoctorOptions(options); // every flag checked before anything connects
    } catch (err) {
      throw bindings.translate(err) ?? err;
    }
    const target = resolveDbTarget(parsed.flags, io.env);
    const progress = (what: string) => note(io, `doctor: checking ${what} ...`);
    let report: DoctorReport;
    const ds = createDataSource(target, { poolSize: 2 });
    try {
      let connectError: unknown;
      progress(`the database at ${target.display}`);
      await ds.initialize().catch((err: unknown) => (connectError = err));
      try {
        report = await runDoctor({
          ...options,
          ...(connectError === undefined ? { dataSource: ds } : {}),
          onProgress: progress,
          logger: stderrLogger(io, boolFlag(parsed.flags, 'verbose')),
        });
      } catch (err) {
        if (err instanceof InvalidOptionError) throw bindings.translate(err) ?? err;
        // Exit 1 means "a warning" here: an unexpected error is a failure (2).
        io.stderr.write(`rocketmq-tx doctor: ${describeError(err)}\n`);
        return 2;
      }
      if (connectError !== undefined) {
        const line = describeError(databaseError(target, connectError));
        report = buildReport(
          report.checks.map((c) =>
            c.id === 'db.connection'
              ? check('schema', 'db.connection', 'fail', line, {
                  threshold: 'connects',
                  advice: 'database checks not run: fix the URL, the server or the login first',
                })
              : c,
          ),
        );
      }
    } finally {
      if (ds.isInitialized) await ds.destroy().catch(() => undefined);
    }
    if (boolFlag(parsed.flags, 'json')) printJson(io, report);
    else io.stdout.write(renderDoctor(report));
    return report.exitCode;
  },
};
