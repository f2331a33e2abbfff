import { createHash } from 'node:crypto';
import * as path from 'node:path';
import {
  assembleEngine,
  CdcEngineError,
  CdcEngineSupervisor,
  type CdcEnginePlan,
  type CdcEngineState,
} from '../cdc/engine';
import { serveMetrics } from '../cdc/metrics';
import { readChangeLogStatus, readCdcBacklog } from '../store/typeorm/cdcQueries';
import { RESOURCE_NAME_RE } from '../util/clientOptions';
import {
  boolFlag,
  COMMON_FLAGS,
  DB_FLAGS,
  durationFlag,
  intFlag,
  invalid,
  JSON_FLAG,
  stringFlag,
  topicsFlag,
  UsageError,
  type Command,
  type CommandContext,
  type ParsedFlags,
} from './args';
import { openDatabase, requireTables, resolveDbTarget, withDatabase } from './connection';
import { CliError, describeError, formatAge, note, printJson, type Io } from './output';

export const DEFAULT_NAMESRV = '127.0.0.1:9876';
const SNAPSHOT_MODES = ['when_needed', 'initial', 'no_data'] as const;
/** How often the backlog (CDC lag) is measured on the database. */
const LAG_INTERVAL_MS = 5000;

export const cdcFlags = {
  ...DB_FLAGS,
  namesrv: {
    type: 'string',
    value: '<host:port>',
    description: `RocketMQ NameServer address(es) "h1:p;h2:p" of the sink (env ROCKETMQ_NAMESRV; default ${DEFAULT_NAMESRV})`,
  },
  home: {
    type: 'string',
    value: '<dir>',
    description: 'engine jars, offsets, schema history, state and logs (default ./.rocketmq-tx-cdc)',
  },
  name: {
    type: 'string',
    value: '<name>',
    description: 'engine name: its offset and history files; one per database (default rmqtx-cdc)',
  },
  'server-id': {
    type: 'string',
    value: '<n>',
    description: 'binlog client server id, unique among the server replicas (default derived from --name)',
  },
  'producer-group': {
    type: 'string',
    value: '<group>',
    description: 'RocketMQ producer group of the sink (default <name>)',
  },
  'transaction-topics': {
    type: 'string',
    multiple: true,
    value: '<t1,t2>',
    description: 'topics whose message type is TRANSACTION (half message + commit)',
  },
  'fifo-topics': {
    type: 'string',
    multiple: true,
    value: '<t1,t2>',
    description: 'topics whose message type is FIFO (messageGroup = aggregateId)',
  },
  snapshot: {
    type: 'string',
    value: '<mode>',
    description:
      'without a usable stored offset: when_needed (read the CDC rows, then the binlog), initial, no_data (binlog head only); default when_needed',
  },
  metrics: {
    type: 'string',
    value: '<host:port>',
    description:
      'serve the engine figures for Prometheus at http://<host:port>/metrics (e.g. 127.0.0.1:9464)',
  },
  'send-timeout': {
    type: 'string',
    value: '<duration>',
    description: 'one send, before a retry (default 5s)',
  },
  'progress-interval': {
    type: 'string',
    value: '<duration>',
    description: 'progress line on stderr every <duration>; 0s: none (default 30s)',
  },
  ...JSON_FLAG,
  ...COMMON_FLAGS,
} as const satisfies Command['flags'];

/** Flags to the engine plan; every value validated here (the engine gets nothing unchecked). */
export function planCdc(
  flags: ParsedFlags,
  env: Record<string, string | undefined>,
  cwd: string,
): CdcEnginePlan & { progressIntervalMs: number; metrics?: { host: string; port: number } } {
  const target = resolveDbTarget(flags, env);
  const name = stringFlag(flags, 'name') ?? 'rmqtx-cdc';
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) throw invalid('name', name, '1-64 letters, digits, "_" or "-"');
  const namesrv = stringFlag(flags, 'namesrv') ?? (env.ROCKETMQ_NAMESRV || DEFAULT_NAMESRV);
  if (!/^[A-Za-z0-9.-]+:\d{1,5}(;[A-Za-z0-9.-]+:\d{1,5})*$/.test(namesrv)) {
    throw invalid('namesrv', namesrv, '"host:port" or "host1:port;host2:port"');
  }
  const producerGroup = stringFlag(flags, 'producer-group') ?? name;
  if (!RESOURCE_NAME_RE.test(producerGroup)) {
    throw invalid('producer-group', producerGroup, 'a name of 1-127 letters, digits, "_", "-" or "%"');
  }
  const snapshot = stringFlag(flags, 'snapshot') ?? 'when_needed';
  if (!(SNAPSHOT_MODES as readonly string[]).includes(snapshot)) {
    throw invalid('snapshot', snapshot, SNAPSHOT_MODES.join(', '));
  }
  const digest = createHash('sha256').update(name).digest();
  const serverId =
    intFlag(flags, 'server-id', { min: 1, max: 4_294_967_295 }) ?? 5400 + (digest.readUInt16BE(0) % 1000);
  const fifoTopics = topicsFlag(flags, 'fifo-topics');
  const transactionTopics = topicsFlag(flags, 'transaction-topics');
  const both = fifoTopics.filter((t) => transactionTopics.includes(t));
  if (both.length > 0) {
    throw new UsageError(
      `topic ${both[0]} is in both --fifo-topics and --transaction-topics: a topic has one type`,
    );
  }
  const metricsRaw = stringFlag(flags, 'metrics');
  const metricsMatch =
    metricsRaw === undefined ? null : /^([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$/.exec(metricsRaw);
  if (metricsRaw !== undefined && (!metricsMatch || Number(metricsMatch[2]) > 65535)) {
    throw invalid('metrics', metricsRaw, '"host:port" with a port from 0 to 65535, e.g. 127.0.0.1:9464');
  }
  return {
    ...(metricsMatch
      ? { metrics: { host: metricsMatch[1]!.replace(/^\[|\]$/g, ''), port: Number(metricsMatch[2]) } }
      : {}),
    home: path.resolve(cwd, stringFlag(flags, 'home') ?? '.rocketmq-tx-cdc'),
    name,
    db: {
      type: target.type === 'postgres' ? 'postgres' : 'mysql',
      host: target.host,
      port: target.port,
      user: target.username,
      ...(target.password !== undefined ? { password: target.password } : {}),
      database: target.database,
    },
    serverId,
    namesrv,
    producerGroup,
    fifoTopics,
    transactionTopics,
    snapshotMode: snapshot as CdcEnginePlan['snapshotMode'],
    sendTimeoutMs: durationFlag(flags, 'send-timeout', { minMs: 100, maxMs: 600_000 }) ?? 5000,
    progressIntervalMs:
      durationFlag(flags, 'progress-interval', { minMs: 0, maxMs: 24 * 3_600_000 }) ?? 30_000,
  };
}

export function stateLine(s: CdcEngineState): string {
  const behind =
    s.behindEvents === null ? '' : `, behind ${s.behindEvents} events (oldest ${formatAge(s.behindMs)})`;
  const last = s.lastSourceTsMs ? `, last row committed ${new Date(s.lastSourceTsMs).toISOString()}` : '';
  return (
    `published ${s.published}${behind}, other rows ${s.skipped}, send retries ${s.sendRetries}, ` +
    `restarts ${Math.max(0, s.restarts)}${last}${s.lastError ? `, last error: ${s.lastError}` : ''}`
  );
}

async function runCdc(io: Io, ctx: CommandContext, flags: ParsedFlags): Promise<number> {
  const plan = planCdc(flags, io.env, process.cwd());
  const target = resolveDbTarget(flags, io.env);
  const verbose = boolFlag(flags, 'verbose');
  // The table must exist before the engine starts (its schema history starts from it).
  const server = await withDatabase(
    target,
    async (ds) => {
      await requireTables(target, ds, ['outbox_event']);
      return readChangeLogStatus(ds);
    },
    { poolSize: 1 },
  );
  if (!server.readable) {
    const need = plan.db.type === 'postgres' ? 'wal_level=logical' : 'log_bin ON and binlog_format ROW';
    throw new CliError(
      `the server at ${target.display} has ${server.settings}: rocketmq-tx cdc needs ${need} (docs/cdc.md)`,
    );
  }
  // Debezium's MySQL connector asks a server reporting 8.4+ for SHOW BINARY LOG STATUS, and the
  // MySQL JDBC driver one reporting 5.7.20+ for @@transaction_isolation: MariaDB 10.x has neither.
  const [major = 0, minor = 0, patch = 0] = server.version.split(/[.-]/).map(Number);
  if (
    /mariadb/i.test(server.version) &&
    (major > 5 || (major === 5 && (minor > 7 || (minor === 7 && patch >= 20))))
  ) {
    throw new CliError(
      `the server at ${target.display} is MariaDB reporting version ${server.version}: the Debezium MySQL ` +
        'connector and JDBC driver need it to report 5.7.19 or lower (start it with --version=5.7.19-MariaDB-<version>, ' +
        'as scripts/mariadb-binlog.js does), or use a MySQL server (docs/cdc.md)',
    );
  }
  let classpath: string;
  try {
    classpath = await assembleEngine(plan.home, (line) => note(io, line));
  } catch (err) {
    if (err instanceof CdcEngineError) throw new CliError(err.message, err);
    throw err;
  }
  const supervisor = new CdcEngineSupervisor(plan, classpath, {
    onNotice: (line) => note(io, line),
    ...(verbose ? { onLog: (line: string) => note(io, `cdc[engine] ${line}`) } : {}),
  });
  let signals = 0;
  const remove = ctx.onSignal((signal) => {
    signals++;
    if (signals === 1) {
      note(io, `cdc: ${signal}: the engine finishes its send, stores its offset and exits`);
      supervisor.stop();
    } else {
      note(io, `cdc: second ${signal}: killing the engine; the next start resends from the stored offset`);
      supervisor.kill();
    }
  });
  note(
    io,
    `cdc: engine ${plan.name}: binlog of ${target.display} (server id ${plan.serverId}) -> RocketMQ ${plan.namesrv}, ` +
      `home ${plan.home}`,
  );
  // The backlog is measured on the database every few seconds (one connection).
  const ds = await openDatabase(target, { poolSize: 1 });
  let measuring = false;
  const measure = async () => {
    if (measuring) return;
    measuring = true;
    try {
      const b = await readCdcBacklog(ds, supervisor.current.lastEventId);
      supervisor.setBacklog(b.events, b.ageMs);
    } catch (err) {
      if (verbose) note(io, `cdc: backlog query failed: ${describeError(err)}`);
    } finally {
      measuring = false;
    }
  };
  const timers = [setInterval(() => void measure(), LAG_INTERVAL_MS)];
  if (plan.progressIntervalMs > 0) {
    timers.push(
      setInterval(() => note(io, `cdc: ${stateLine(supervisor.current)}`), plan.progressIntervalMs),
    );
  }
  let metrics: { close: () => Promise<void>; port: number } | undefined;
  try {
    if (plan.metrics) {
      const where = plan.metrics;
      metrics = await serveMetrics(where, () => supervisor.current).catch((err: Error) => {
        throw new CliError(`--metrics ${where.host}:${where.port}: ${err.message}`, err);
      });
      note(io, `cdc: metrics at http://${plan.metrics.host}:${metrics.port}/metrics`);
    }
    await supervisor.run();
  } catch (err) {
    supervisor.stop();
    if (err instanceof CliError) throw err;
    throw new CliError(`cdc engine failed: ${describeError(err)}`, err);
  } finally {
    for (const t of timers) clearInterval(t);
    remove();
    await metrics?.close();
    // The backlog as the engine left it, for the last line and the state file.
    await measure();
    await ds.destroy().catch(() => undefined);
  }
  note(io, `cdc: stopped: ${stateLine(supervisor.current)}`);
  if (boolFlag(flags, 'json')) printJson(io, supervisor.current);
  return 0;
}

export const cdcCommand: Command = {
  name: 'cdc',
  usage: 'rocketmq-tx cdc [flags]',
  description:
    "Publishes the outbox_event rows written with delivery 'cdc' from the MySQL/MariaDB binlog or\n" +
    "PostgreSQL's logical decoding (pgoutput): a Debezium embedded engine (Java 17+; its jars come\n" +
    'from Maven Central on the first start) with a RocketMQ sink. The binlog must be on, in ROW\n' +
    'format (PostgreSQL: wal_level=logical). Offsets and schema history live in --home;\n' +
    'a restart resumes from the stored offset (a crash may resend, never lose). The engine is\n' +
    'restarted when it dies. First SIGINT/SIGTERM: the engine stores its offset and exits; a second\n' +
    'one kills it. Database password: ROCKETMQ_TX_DB_PASSWORD (never in a file or argv).',
  flags: cdcFlags,
  run: (parsed, ctx) => runCdc(ctx.io, ctx, parsed.flags),
};
