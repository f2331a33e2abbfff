import { DataSource } from 'typeorm';
import { accessDeniedAny, driverErrorOf, failureAny } from '../store/typeorm/dialect';
import { probeTable } from '../store/typeorm/tableProbe';
import { requireEndpoints, RESOURCE_NAME_RE } from '../util/clientOptions';
import { invalid, stringFlag, UsageError, type FlagSpecs, type ParsedFlags } from './args';
import { CliError, describeError, maskSecrets } from './output';

export const DEFAULT_DB_URL = 'mysql://root@127.0.0.1:3306/test';
export const DEFAULT_ENDPOINTS = '127.0.0.1:8081';

/** URL schemes and the TypeORM driver each selects. */
const SCHEMES: Readonly<Record<string, { type: DbTarget['type']; port: number }>> = {
  mysql: { type: 'mysql', port: 3306 },
  mariadb: { type: 'mariadb', port: 3306 },
  postgres: { type: 'postgres', port: 5432 },
  postgresql: { type: 'postgres', port: 5432 },
};

export interface DbTarget {
  type: 'mysql' | 'mariadb' | 'postgres';
  host: string;
  port: number;
  username: string;
  /** From the environment only; never printed. */
  password?: string;
  database: string;
  /** The URL with its password masked: the only form that is ever printed. */
  display: string;
}

/**
 * --db-url, else ROCKETMQ_TX_DB_URL, else the default. A password is taken from the environment
 * only (ROCKETMQ_TX_DB_PASSWORD or the env URL): flags show in the process list.
 */
export function resolveDbTarget(flags: ParsedFlags, env: Record<string, string | undefined>): DbTarget {
  const fromFlag = stringFlag(flags, 'db-url');
  const fromEnv = env.ROCKETMQ_TX_DB_URL;
  const raw = fromFlag ?? (fromEnv !== undefined && fromEnv !== '' ? fromEnv : DEFAULT_DB_URL);
  const source = fromFlag !== undefined ? '--db-url' : fromEnv ? 'ROCKETMQ_TX_DB_URL' : 'the default URL';
  const bad = (allowed: string) =>
    source === '--db-url'
      ? invalid('db-url', maskSecrets(raw), allowed)
      : new UsageError(`invalid ${source} ${JSON.stringify(maskSecrets(raw))}: expected ${allowed}`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw bad('a URL such as mysql://user@host:3306/database or postgres://user@host:5432/database');
  }
  const scheme = SCHEMES[url.protocol.replace(/:$/, '').toLowerCase()];
  if (scheme === undefined) throw bad('a mysql://, mariadb://, postgres:// or postgresql:// URL');
  if (url.hostname === '') throw bad('a URL with a host, such as mysql://user@host:3306/database');
  if (url.pathname.replace(/^\//, '') === '')
    throw bad('a URL that names the database: mysql://host/database');
  if (fromFlag !== undefined && url.password !== '') {
    throw new UsageError(
      `--db-url ${JSON.stringify(maskSecrets(raw))} carries a password, which the process list would show: ` +
        'put it in ROCKETMQ_TX_DB_PASSWORD (or the whole URL in ROCKETMQ_TX_DB_URL)',
    );
  }
  const port = url.port === '' ? scheme.port : Number(url.port);
  const envPassword = env.ROCKETMQ_TX_DB_PASSWORD;
  const password = envPassword ? envPassword : url.password ? decodeURIComponent(url.password) : undefined;
  if (password !== undefined) url.password = 'x';
  return {
    type: scheme.type,
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port,
    username: decodeURIComponent(url.username),
    ...(password !== undefined ? { password } : {}),
    database: decodeURIComponent(url.pathname.replace(/^\//, '')),
    display: maskSecrets(url.toString()),
  };
}

/** A database failure as one line that names the (masked) DSN; the store's dialects classify it. */
export function databaseError(target: DbTarget, err: unknown): CliError {
  const driver = driverErrorOf(err) ?? err;
  const detail = describeError(err);
  switch (failureAny(driver)) {
    case 'UNREACHABLE':
      return new CliError(`cannot reach the database at ${target.display}: ${detail}`, err);
    case 'LOGIN_REFUSED':
      return new CliError(`the database at ${target.display} refused the login: ${detail}`, err);
    case 'TABLE_ACCESS_DENIED': {
      const denied = accessDeniedAny(driver);
      const what = denied ? `${denied.privilege} on ${denied.table}` : 'a table privilege';
      return new CliError(
        `the database user of ${target.display} lacks ${what} (grants per command: docs/security.md): ${detail}`,
        err,
      );
    }
    case 'NO_DATABASE':
      return new CliError(`the database named in ${target.display} does not exist: ${detail}`, err);
    case 'NO_SUCH_TABLE':
      return new CliError(
        `${detail} (database ${target.display}): run the SDK migrations (rocketMqTxMigrations) first`,
        err,
      );
    default:
      return new CliError(`database error at ${target.display}: ${detail}`, err);
  }
}

/** A DataSource on the target, not yet connected (raw SQL only: the SDK stores need no entities). */
export function createDataSource(
  target: DbTarget,
  options: { poolSize?: number; connectTimeoutMs?: number } = {},
): DataSource {
  const common = {
    host: target.host,
    port: target.port,
    username: target.username,
    ...(target.password !== undefined ? { password: target.password } : {}),
    database: target.database,
    poolSize: options.poolSize ?? 4,
    logging: false,
  } as const;
  const timeout = options.connectTimeoutMs ?? 10_000;
  try {
    return target.type === 'postgres'
      ? new DataSource({ type: 'postgres', ...common, connectTimeoutMS: timeout })
      : new DataSource({ type: target.type, ...common, connectTimeout: timeout });
  } catch (err) {
    // TypeORM loads the driver here; its own message names the wrong package ("mysql").
    if (err instanceof Error && err.name === 'DriverPackageNotInstalledError') {
      const pkg = target.type === 'postgres' ? 'pg' : 'mysql2';
      throw new CliError(`the ${pkg} driver is not installed next to rocketmq-tx: npm install ${pkg}`, err);
    }
    throw err;
  }
}

/** Connects; a failure becomes one line naming the masked DSN. */
export async function connect(target: DbTarget, ds: DataSource): Promise<DataSource> {
  try {
    await ds.initialize();
  } catch (err) {
    throw databaseError(target, err);
  }
  return ds;
}

export function openDatabase(
  target: DbTarget,
  options: { poolSize?: number; connectTimeoutMs?: number } = {},
): Promise<DataSource> {
  return connect(target, createDataSource(target, options));
}

/** Fails fast, with the migrations advice, when a table the command needs is missing. */
export async function requireTables(
  target: DbTarget,
  ds: DataSource,
  tables: readonly string[],
): Promise<void> {
  for (const table of tables) {
    try {
      await probeTable(ds, table);
    } catch (err) {
      throw databaseError(target, err);
    }
  }
}

/** Connects ds, runs fn and always closes it; database errors become one-line CliErrors. */
export async function withConnected<T>(
  target: DbTarget,
  ds: DataSource,
  fn: (ds: DataSource) => Promise<T>,
): Promise<T> {
  await connect(target, ds);
  try {
    return await fn(ds);
  } catch (err) {
    if (err instanceof CliError || err instanceof UsageError) throw err;
    if (driverErrorOf(err) !== undefined) throw databaseError(target, err);
    throw err;
  } finally {
    await ds.destroy().catch(() => undefined);
  }
}

/** withConnected on a new DataSource. */
export function withDatabase<T>(
  target: DbTarget,
  fn: (ds: DataSource) => Promise<T>,
  options: { poolSize?: number } = {},
): Promise<T> {
  return withConnected(target, createDataSource(target, options), fn);
}

export const BROKER_FLAGS: FlagSpecs = {
  endpoints: {
    type: 'string',
    value: '<host:port>',
    description: `RocketMQ 5 proxy gRPC endpoints, "h1:p;h2:p" (env ROCKETMQ_ENDPOINTS; default ${DEFAULT_ENDPOINTS})`,
  },
  namespace: { type: 'string', value: '<name>', description: 'RocketMQ namespace (env ROCKETMQ_NAMESPACE)' },
  ssl: { type: 'boolean', description: 'TLS to the proxy (system CAs)' },
  'ca-file': {
    type: 'string',
    value: '<path>',
    description: 'TLS to the proxy, trusting the PEM CA certificate(s) in this file (implies --ssl)',
  },
};

export interface BrokerTarget {
  endpoints: string;
  namespace?: string;
  sslEnabled: boolean;
  /** A custom CA bundle for TLS (`tls: { caFile }`). */
  caFile?: string;
  credentials?: { accessKey: string; accessSecret: string };
}

/** Endpoints from the flag or env; credentials only from ROCKETMQ_ACCESS_KEY / ROCKETMQ_ACCESS_SECRET. */
export function resolveBrokerTarget(
  flags: ParsedFlags,
  env: Record<string, string | undefined>,
): BrokerTarget {
  const fromFlag = stringFlag(flags, 'endpoints');
  const raw = fromFlag ?? (env.ROCKETMQ_ENDPOINTS || DEFAULT_ENDPOINTS);
  try {
    requireEndpoints(raw);
  } catch {
    const allowed = '"host:port" or "host1:port;host2:port"';
    if (fromFlag !== undefined) throw invalid('endpoints', raw, allowed);
    throw new UsageError(`invalid ROCKETMQ_ENDPOINTS ${JSON.stringify(raw)}: expected ${allowed}`);
  }
  const ns = stringFlag(flags, 'namespace') ?? (env.ROCKETMQ_NAMESPACE || undefined);
  if (ns !== undefined && !RESOURCE_NAME_RE.test(ns)) {
    throw invalid('namespace', ns, 'a name of 1-127 letters, digits, "_", "-" or "%"');
  }
  const accessKey = env.ROCKETMQ_ACCESS_KEY || undefined;
  const accessSecret = env.ROCKETMQ_ACCESS_SECRET || undefined;
  if ((accessKey === undefined) !== (accessSecret === undefined)) {
    throw new UsageError(
      `${accessKey === undefined ? 'ROCKETMQ_ACCESS_KEY' : 'ROCKETMQ_ACCESS_SECRET'} is not set: ` +
        'set both ROCKETMQ_ACCESS_KEY and ROCKETMQ_ACCESS_SECRET, or neither',
    );
  }
  const caFile = stringFlag(flags, 'ca-file');
  if (caFile !== undefined && caFile.trim() === '') throw invalid('ca-file', caFile, 'a path to a PEM file');
  return {
    endpoints: raw,
    ...(ns !== undefined ? { namespace: ns } : {}),
    sslEnabled: flags.ssl === true || caFile !== undefined,
    ...(caFile !== undefined ? { caFile } : {}),
    ...(accessKey && accessSecret ? { credentials: { accessKey, accessSecret } } : {}),
  };
}
