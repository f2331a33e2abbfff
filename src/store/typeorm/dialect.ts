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

/** The databases the SDK supports: MySQL/MariaDB, and PostgreSQL (15+). */
export type DialectName = 'mysql' | 'postgres';

/** Per-database SQL and error classification. One implementation per supported database. */
export interface Dialect {
  readonly name: DialectName;
  placeholder(index: number): string;
  nowExpression: string;
  classify(err: unknown): DbErrorKind;
  /** The missing privilege when err is a table or column access denial; undefined otherwise. */
  accessDenied(err: unknown): AccessDenied | undefined;
}

function driverError(err: unknown): {
  code?: unknown;
  errno?: unknown;
  sqlMessage?: unknown;
  message?: unknown;
  table?: unknown;
  column?: unknown;
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

// Node's socket-level codes, shared by both drivers.
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

// mysql2's and Node's socket-level codes, then the server's "too many connections", "server
// shutdown" and MariaDB's "connection killed" (errno 1040, 1203, 1053, 1927).
const CONNECTION_CODES = new Set([
  ...SOCKET_CODES,
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
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
// 1698 (ER_ACCESS_DENIED_NO_PASSWORD_ERROR) is a refused login too: MariaDB 10.11 answers it
// instead of 1045 to about a third of the logins of an unknown user with a password (7 of 20).
const ACCESS_CODES = new Set([
  'ER_ACCESS_DENIED_ERROR',
  'ER_DBACCESS_DENIED_ERROR',
  'ER_ACCESS_DENIED_NO_PASSWORD_ERROR',
]);
const ACCESS_ERRNOS = new Set([1045, 1044, 1698]);

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
};

// PostgreSQL SQLSTATEs (https://www.postgresql.org/docs/15/errcodes-appendix.html).
// Class 08 (connection exception), 57P01-57P03 (admin/crash shutdown, cannot connect now),
// 53300 (too many connections), 57P05 (idle session timeout).
const PG_CONNECTION_STATES = new Set(['53300', '57P01', '57P02', '57P03', '57P05']);
// 42703 undefined column, 42601 syntax error, 3D000 unknown database, 3F000 unknown schema.
const PG_SCHEMA_STATES = new Set(['42703', '42601', '3D000', '3F000']);
// 42501 insufficient privilege, 28000 / 28P01 a refused login.
const PG_ACCESS_STATES = new Set(['42501', '28000', '28P01']);
// node-postgres' own messages when the socket went away under a query.
const PG_CONNECTION_MESSAGES = [
  'Connection terminated',
  'Client has encountered a connection error',
  'Client was closed',
];

// "permission denied for table tx_record" (PostgreSQL 15; the privilege is not named).
const PG_TABLE_DENIED_RE = /^permission denied for (?:table|relation) "?([^"\s]+)"?/;

function postgresAccessDenied(err: unknown): AccessDenied | undefined {
  const d = driverError(err);
  if (d.code !== '42501') return undefined;
  const text = typeof d.message === 'string' ? d.message : '';
  const m = PG_TABLE_DENIED_RE.exec(text);
  const table = typeof d.table === 'string' ? d.table : m?.[1];
  if (table === undefined) return undefined;
  return { privilege: 'a privilege', table, ...(typeof d.column === 'string' ? { column: d.column } : {}) };
}

function postgresClassify(err: unknown): DbErrorKind {
  const d = driverError(err);
  const code = typeof d.code === 'string' ? d.code : '';
  if (code === '23505') return 'DUPLICATE_KEY';
  // 55P03 lock_not_available: lock_timeout expired (or NOWAIT).
  if (code === '55P03') return 'LOCK_WAIT_TIMEOUT';
  // 40P01 deadlock_detected, 40001 serialization_failure: the transaction may simply run again.
  if (code === '40P01' || code === '40001') return 'DEADLOCK';
  if (code === '42P01') return 'NO_SUCH_TABLE';
  if (PG_ACCESS_STATES.has(code)) return 'ACCESS_DENIED';
  if (code.startsWith('08') || PG_CONNECTION_STATES.has(code) || SOCKET_CODES.has(code)) return 'CONNECTION';
  const text = typeof d.message === 'string' ? d.message : '';
  if (PG_CONNECTION_MESSAGES.some((m) => text.startsWith(m))) return 'CONNECTION';
  if (PG_SCHEMA_STATES.has(code)) return 'SCHEMA';
  return 'OTHER';
}

export const postgresDialect: Dialect = {
  name: 'postgres',
  placeholder: (index) => `$${index}`,
  nowExpression: 'CURRENT_TIMESTAMP(3)',
  classify: postgresClassify,
  accessDenied: postgresAccessDenied,
};

/**
 * Classifies an error of either driver (mysql2's ER_* codes and errnos and PostgreSQL's SQLSTATEs
 * do not overlap), for code that does not know which database produced it.
 */
export function classifyAny(err: unknown): DbErrorKind {
  const kind = mysqlDialect.classify(err);
  return kind === 'OTHER' ? postgresDialect.classify(err) : kind;
}

/** The refused privilege of either driver's access error; undefined for any other error. */
export function accessDeniedAny(err: unknown): AccessDenied | undefined {
  return mysqlDialect.accessDenied(err) ?? postgresDialect.accessDenied(err);
}

/**
 * Why a connection or a statement failed, finer than DbErrorKind where a person must act
 * differently (the CLI's one-line failures): the server cannot be reached, the login (user,
 * password, host or database access) was refused, the named database does not exist, a table
 * privilege is missing, the table is missing. Either driver.
 */
export type DbFailure =
  'UNREACHABLE' | 'LOGIN_REFUSED' | 'NO_DATABASE' | 'TABLE_ACCESS_DENIED' | 'NO_SUCH_TABLE' | 'OTHER';

// A refused login or database (MySQL 1045 / 1044 / 1698; PostgreSQL 28P01 wrong password, 28000 no
// pg_hba entry or the role may not log in). A missing database: MySQL 1049, PostgreSQL 3D000.
const LOGIN_REFUSED_STATES = new Set(['28000', '28P01']);
const NO_DATABASE_CODES = new Set(['ER_BAD_DB_ERROR', '3D000']);

/**
 * The driver's own error under the wrappers around it (TypeORM's QueryFailedError.driverError,
 * an SDK error's cause): the first object with a string `code` that is not an SDK error
 * (those carry `retriable`); undefined when there is none.
 */
export function driverErrorOf(err: unknown): object | undefined {
  for (let e: unknown = err, i = 0; typeof e === 'object' && e !== null && i < 4; i++) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === 'string' && typeof (e as { retriable?: unknown }).retriable !== 'boolean') return e;
    e = (e as { driverError?: unknown; cause?: unknown }).driverError ?? (e as { cause?: unknown }).cause;
  }
  return undefined;
}

export function failureAny(err: unknown): DbFailure {
  const { code, errno } = driverError(err);
  const kind = classifyAny(err);
  if (kind === 'CONNECTION' || code === 'ENOTFOUND') return 'UNREACHABLE';
  if (kind === 'NO_SUCH_TABLE') return 'NO_SUCH_TABLE';
  if ((typeof code === 'string' && NO_DATABASE_CODES.has(code)) || errno === 1049) return 'NO_DATABASE';
  if (kind !== 'ACCESS_DENIED') return 'OTHER';
  const login =
    isIn(ACCESS_CODES, ACCESS_ERRNOS, code, errno) ||
    (typeof code === 'string' && LOGIN_REFUSED_STATES.has(code));
  return login ? 'LOGIN_REFUSED' : 'TABLE_ACCESS_DENIED';
}

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
  if (type === 'postgres') return postgresDialect;
  throw new InvalidOptionError('dataSource.options.type', type, '"mysql", "mariadb" or "postgres"');
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
