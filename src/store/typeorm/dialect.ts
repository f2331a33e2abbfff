import type { DataSource, QueryRunner } from 'typeorm';
import { InvalidOptionError } from '../../errors';

export type DbErrorKind =
  | 'DUPLICATE_KEY'
  | 'LOCK_WAIT_TIMEOUT'
  | 'DEADLOCK'
  /** Lost, refused or reset, the server shutting down, too many connections: transient. */
  | 'CONNECTION'
  /** A refused login, database, table or column privilege. */
  | 'ACCESS_DENIED'
  | 'NO_SUCH_TABLE'
  /** The schema or the statement is wrong: unknown column or database, syntax error. */
  | 'SCHEMA'
  | 'OTHER';

/** What the server refused: a privilege on a table (and the column, for a column-level check). */
export interface AccessDenied {
  privilege: string;
  table: string;
  column?: string;
}

/** Per-database SQL and error classification. One implementation per supported database. */
export interface Dialect {
  readonly name: 'mysql';
  placeholder(index: number): string;
  nowExpression: string;
  classify(err: unknown): DbErrorKind;
  /** The missing privilege when err is a table or column access denial; undefined otherwise. */
  accessDenied(err: unknown): AccessDenied | undefined;
  /** Runs fn with the session's row-lock wait bounded to about `ms`, then restores the session. */
  withLockWait<T>(queryRunner: QueryRunner, ms: number, fn: () => Promise<T>): Promise<T>;
}

function driverError(err: unknown): {
  code?: unknown;
  errno?: unknown;
  sqlMessage?: unknown;
  message?: unknown;
} {
  if (typeof err !== 'object' || err === null) return {};
  const inner = (err as { driverError?: unknown }).driverError;
  return (typeof inner === 'object' && inner !== null ? inner : err) as { code?: unknown; errno?: unknown };
}

// MariaDB: "INSERT command denied to user 'u'@'h' for table `db`.`t`"; MySQL: "... for table 't'".
// Column checks: "SELECT command denied to user 'u'@'h' for column 'c' in table 't'".
const NAME = "[`']?([^`'.]+)[`']?";
const TABLE_DENIED_RE = new RegExp(`^(.+?) command denied to user .+ for table (?:${NAME}\\.)?${NAME}$`);
const COLUMN_DENIED_RE = new RegExp(
  `^(.+?) command denied to user .+ for column ${NAME} in table (?:${NAME}\\.)?${NAME}$`,
);

function mysqlAccessDenied(err: unknown): AccessDenied | undefined {
  const d = driverError(err);
  const text =
    typeof d.sqlMessage === 'string' ? d.sqlMessage : typeof d.message === 'string' ? d.message : '';
  if (d.code === 'ER_TABLEACCESS_DENIED_ERROR' || d.errno === 1142) {
    const m = TABLE_DENIED_RE.exec(text);
    return { privilege: m?.[1] ?? 'a privilege', table: m?.[3] ?? '(a table)' };
  }
  if (d.code === 'ER_COLUMNACCESS_DENIED_ERROR' || d.errno === 1143) {
    const m = COLUMN_DENIED_RE.exec(text);
    return {
      privilege: m?.[1] ?? 'a privilege',
      table: m?.[4] ?? '(a table)',
      ...(m ? { column: m[2]! } : {}),
    };
  }
  return undefined;
}

// mysql2's socket-level codes, then the server's "too many connections", "server shutdown" and
// MariaDB's "connection killed" (errno 1040, 1203, 1053, 1927).
const CONNECTION_CODES = new Set([
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ER_CON_COUNT_ERROR',
  'ER_TOO_MANY_USER_CONNECTIONS',
  'ER_SERVER_SHUTDOWN',
  'ER_CONNECTION_KILLED',
]);
const CONNECTION_ERRNOS = new Set([1040, 1203, 1053, 1927]);
// Unknown column, syntax error, unknown database, no database selected.
const SCHEMA_CODES = new Set(['ER_BAD_FIELD_ERROR', 'ER_PARSE_ERROR', 'ER_BAD_DB_ERROR', 'ER_NO_DB_ERROR']);
const SCHEMA_ERRNOS = new Set([1054, 1064, 1049, 1046]);
// A refused login or database (the table and column refusals are read by mysqlAccessDenied).
const ACCESS_CODES = new Set(['ER_ACCESS_DENIED_ERROR', 'ER_DBACCESS_DENIED_ERROR']);
const ACCESS_ERRNOS = new Set([1045, 1044]);

function isIn(codes: Set<string>, errnos: Set<number>, code: unknown, errno: unknown): boolean {
  return (typeof code === 'string' && codes.has(code)) || (typeof errno === 'number' && errnos.has(errno));
}

export const mysqlDialect: Dialect = {
  name: 'mysql',
  placeholder: () => '?',
  nowExpression: 'CURRENT_TIMESTAMP(3)',
  classify(err) {
    const { code, errno } = driverError(err);
    if (code === 'ER_DUP_ENTRY' || errno === 1062) return 'DUPLICATE_KEY';
    if (code === 'ER_LOCK_WAIT_TIMEOUT' || errno === 1205) return 'LOCK_WAIT_TIMEOUT';
    if (code === 'ER_LOCK_DEADLOCK' || errno === 1213) return 'DEADLOCK';
    if (code === 'ER_NO_SUCH_TABLE' || errno === 1146) return 'NO_SUCH_TABLE';
    if (mysqlAccessDenied(err) || isIn(ACCESS_CODES, ACCESS_ERRNOS, code, errno)) return 'ACCESS_DENIED';
    if (isIn(CONNECTION_CODES, CONNECTION_ERRNOS, code, errno)) return 'CONNECTION';
    if (isIn(SCHEMA_CODES, SCHEMA_ERRNOS, code, errno)) return 'SCHEMA';
    return 'OTHER';
  },
  accessDenied: mysqlAccessDenied,
  async withLockWait(queryRunner, ms, fn) {
    // innodb_lock_wait_timeout is whole seconds (MariaDB treats 0 as NOWAIT): round up, at least 1.
    const seconds = Math.max(1, Math.ceil(ms / 1000));
    // Save and set in one round trip; restore (and clear the variable) in one more.
    await queryRunner.query(
      `SET @rocketmq_tx_lock_wait = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = ${seconds}`,
    );
    try {
      return await fn();
    } finally {
      await queryRunner.query(
        'SET SESSION innodb_lock_wait_timeout = @rocketmq_tx_lock_wait, @rocketmq_tx_lock_wait = NULL',
      );
    }
  },
};

/** A deadlock victim or a lock-wait timeout: the statement or transaction may simply run again. */
export function isLockVictim(kind: DbErrorKind): boolean {
  return kind === 'DEADLOCK' || kind === 'LOCK_WAIT_TIMEOUT';
}

/**
 * Whether running the same statement again can succeed: yes after a lost connection or as a lock
 * victim, no against a wrong schema or a refused privilege; undefined when the kind does not say.
 */
export function isRetriableKind(kind: DbErrorKind): boolean | undefined {
  switch (kind) {
    case 'CONNECTION':
    case 'LOCK_WAIT_TIMEOUT':
    case 'DEADLOCK':
      return true;
    case 'ACCESS_DENIED':
    case 'NO_SUCH_TABLE':
    case 'SCHEMA':
      return false;
    default:
      return undefined;
  }
}

/** Whether err came from the database driver (TypeORM's QueryFailedError, or a driver error itself). */
export function isDatabaseError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  if ((err as { driverError?: unknown }).driverError !== undefined) return true;
  const { errno, sqlState } = err as { errno?: unknown; sqlState?: unknown };
  return typeof errno === 'number' || typeof sqlState === 'string';
}

export function dialectFor(dataSource: DataSource): Dialect {
  const type = dataSource.options.type;
  if (type === 'mysql' || type === 'mariadb') return mysqlDialect;
  throw new InvalidOptionError(
    'dataSource.options.type',
    type,
    '"mysql" or "mariadb" (PostgreSQL support is planned)',
  );
}

/**
 * Closes a query runner's driver connection instead of returning it to the pool (mysql2:
 * destroy(); pg: release(err)). The server rolls back whatever the connection had open.
 */
export function destroyConnection(queryRunner: QueryRunner): void {
  const conn = (queryRunner as unknown as { databaseConnection?: unknown }).databaseConnection as
    { destroy?: () => void; release?: (err?: Error) => void } | undefined;
  try {
    if (typeof conn?.destroy === 'function') conn.destroy();
    else if (typeof conn?.release === 'function')
      conn.release(new Error('rocketmq-tx: connection discarded'));
  } catch {
    // Already gone.
  }
}
