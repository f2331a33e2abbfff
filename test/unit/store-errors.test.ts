import { StoreAccessDeniedError, StoreError } from '../../src';
import {
  classifyAny,
  driverErrorOf,
  failureAny,
  mysqlDialect,
  postgresDialect,
} from '../../src/store/typeorm/dialect';
import { toStoreError } from '../../src/store/typeorm/storeError';

/** As TypeORM reports a failed statement: a QueryFailedError-like error with the driver's error. */
const failedQuery = (code: string, errno: number | undefined, sqlMessage: string) =>
  Object.assign(new Error(sqlMessage), { driverError: { code, errno, sqlMessage } });
/** As mysql2 rejects a connection attempt or a query on a dead socket: the driver error itself. */
const socketError = (code: string, errno: number | undefined, message: string) =>
  Object.assign(new Error(message), { code, errno, fatal: true });

describe('toStoreError: retriable only where running the same statement again can succeed', () => {
  it.each([
    [
      'a missing table',
      failedQuery('ER_NO_SUCH_TABLE', 1146, "Table 'shop.tx_record' doesn't exist"),
      'NO_SUCH_TABLE',
    ],
    [
      'a missing column',
      failedQuery('ER_BAD_FIELD_ERROR', 1054, "Unknown column 'confirmed_at' in 'field list'"),
      'SCHEMA',
    ],
    [
      'a syntax error',
      failedQuery('ER_PARSE_ERROR', 1064, 'You have an error in your SQL syntax near LIMIT'),
      'SCHEMA',
    ],
    ['an unknown database', socketError('ER_BAD_DB_ERROR', 1049, "Unknown database 'shop'"), 'SCHEMA'],
    [
      'a refused login',
      socketError('ER_ACCESS_DENIED_ERROR', 1045, "Access denied for user 'a'@'h' (using password: YES)"),
      'ACCESS_DENIED',
    ],
    [
      'a refused database',
      socketError('ER_DBACCESS_DENIED_ERROR', 1044, "Access denied for user 'a'@'%' to database 'shop'"),
      'ACCESS_DENIED',
    ],
    [
      'a login refused as 1698',
      socketError('ER_ACCESS_DENIED_NO_PASSWORD_ERROR', 1698, "Access denied for user 'a'@'127.0.0.1'"),
      'ACCESS_DENIED',
    ],
  ])('%s is not retriable', (_name, err, kind) => {
    expect(mysqlDialect.classify(err)).toBe(kind);
    const typed = toStoreError('could not insert tx_record', err);
    expect(typed).toBeInstanceOf(StoreError);
    expect(typed).not.toBeInstanceOf(StoreAccessDeniedError);
    expect(typed).toMatchObject({ code: 'STORE_ERROR', retriable: false, cause: err });
  });

  it.each([
    [
      'a deadlock',
      failedQuery('ER_LOCK_DEADLOCK', 1213, 'Deadlock found when trying to get lock'),
      'DEADLOCK',
    ],
    [
      'a lock-wait timeout',
      failedQuery('ER_LOCK_WAIT_TIMEOUT', 1205, 'Lock wait timeout exceeded'),
      'LOCK_WAIT_TIMEOUT',
    ],
    ['too many connections', socketError('ER_CON_COUNT_ERROR', 1040, 'Too many connections'), 'CONNECTION'],
    [
      'too many user connections',
      socketError(
        'ER_TOO_MANY_USER_CONNECTIONS',
        1203,
        "User a already has more than 'max_user_connections' active connections",
      ),
      'CONNECTION',
    ],
    [
      'a lost connection (mid-query)',
      failedQuery(
        'PROTOCOL_CONNECTION_LOST',
        undefined,
        'Connection lost: The server closed the connection.',
      ),
      'CONNECTION',
    ],
    [
      'a lost connection (bare driver error)',
      socketError(
        'PROTOCOL_CONNECTION_LOST',
        undefined,
        'Connection lost: The server closed the connection.',
      ),
      'CONNECTION',
    ],
    [
      'a refused connection',
      socketError('ECONNREFUSED', -111, 'connect ECONNREFUSED 127.0.0.1:3306'),
      'CONNECTION',
    ],
    ['a reset connection', socketError('ECONNRESET', -104, 'read ECONNRESET'), 'CONNECTION'],
    [
      'a server shutting down',
      failedQuery('ER_SERVER_SHUTDOWN', 1053, 'Server shutdown in progress'),
      'CONNECTION',
    ],
    [
      'a killed connection (MariaDB)',
      failedQuery('ER_CONNECTION_KILLED', 1927, 'Connection was killed'),
      'CONNECTION',
    ],
  ])('%s is retriable', (_name, err, kind) => {
    expect(mysqlDialect.classify(err)).toBe(kind);
    expect(toStoreError('could not open a database transaction', err)).toMatchObject({
      code: 'STORE_ERROR',
      retriable: true,
      cause: err,
    });
  });

  it("an error the dialect cannot classify keeps the caller's default", () => {
    const odd = failedQuery('ER_SOMETHING_NEW', 4999, 'a new server error');
    expect(mysqlDialect.classify(odd)).toBe('OTHER');
    expect(toStoreError('claim', odd).retriable).toBe(true);
    expect(toStoreError('claim', odd, false).retriable).toBe(false);
    expect(toStoreError('claim', new Error('not a database error'), false).retriable).toBe(false);
  });

  it('an error that is already a StoreError passes through unchanged', () => {
    const own = new StoreError('options.dataSource is not initialized', undefined, false);
    expect(toStoreError('claim', own)).toBe(own);
  });
});

describe('PostgreSQL: SQLSTATEs classified like their MySQL counterparts', () => {
  /** As node-postgres reports a server error (TypeORM wraps it as driverError). */
  const pgError = (code: string, message: string, extra: Record<string, unknown> = {}) =>
    Object.assign(new Error(message), { driverError: { code, message, severity: 'ERROR', ...extra } });

  it.each([
    ['23505', 'duplicate key value violates unique constraint "tx_record_pkey"', 'DUPLICATE_KEY', undefined],
    ['55P03', 'canceling statement due to lock timeout', 'LOCK_WAIT_TIMEOUT', true],
    ['40P01', 'deadlock detected', 'DEADLOCK', true],
    ['40001', 'could not serialize access due to concurrent update', 'DEADLOCK', true],
    ['42P01', 'relation "tx_record" does not exist', 'NO_SUCH_TABLE', false],
    ['42703', 'column "confirmed_at" does not exist', 'SCHEMA', false],
    ['3D000', 'database "shop" does not exist', 'SCHEMA', false],
    ['28P01', 'password authentication failed for user "a"', 'ACCESS_DENIED', false],
    ['57P01', 'terminating connection due to administrator command', 'CONNECTION', true],
    ['08006', 'connection failure', 'CONNECTION', true],
    ['53300', 'sorry, too many clients already', 'CONNECTION', true],
  ])('%s (%s) is %s', (code, message, kind, retriable) => {
    const err = pgError(code, message);
    expect(postgresDialect.classify(err)).toBe(kind);
    expect(classifyAny(err)).toBe(kind);
    if (retriable !== undefined) expect(toStoreError('claim', err).retriable).toBe(retriable);
  });

  it("node-postgres' own lost-connection errors are CONNECTION", () => {
    expect(postgresDialect.classify(new Error('Connection terminated unexpectedly'))).toBe('CONNECTION');
  });

  it('a refused table privilege is a StoreAccessDeniedError naming the table', () => {
    const err = pgError('42501', 'permission denied for table tx_record');
    expect(toStoreError('claim', err)).toMatchObject({
      code: 'STORE_ACCESS_DENIED',
      retriable: false,
      cause: err,
    });
    expect(postgresDialect.accessDenied(err)).toEqual({ privilege: 'a privilege', table: 'tx_record' });
  });

  it('placeholders are numbered', () => {
    expect([1, 2].map((i) => postgresDialect.placeholder(i))).toEqual(['$1', '$2']);
  });
});

describe('failureAny: what a person must fix, for either driver, under any wrapper', () => {
  const mysql = (code: string, errno: number, sqlMessage: string) =>
    Object.assign(new Error(sqlMessage), { code, errno, sqlMessage });
  const pg = (code: string, message: string) =>
    Object.assign(new Error(message), { code, severity: 'FATAL' });

  it.each([
    ['mysql2 refused socket', mysql('ECONNREFUSED', -111, 'connect ECONNREFUSED'), 'UNREACHABLE'],
    [
      'an unknown host',
      Object.assign(new Error('getaddrinfo ENOTFOUND db'), { code: 'ENOTFOUND' }),
      'UNREACHABLE',
    ],
    ['PostgreSQL cannot connect now', pg('57P03', 'the database system is starting up'), 'UNREACHABLE'],
    [
      'MySQL wrong password',
      mysql('ER_ACCESS_DENIED_ERROR', 1045, "Access denied for user 'a'"),
      'LOGIN_REFUSED',
    ],
    [
      'MySQL database refused',
      mysql('ER_DBACCESS_DENIED_ERROR', 1044, 'Access denied to database'),
      'LOGIN_REFUSED',
    ],
    [
      'MariaDB login refused as ER_ACCESS_DENIED_NO_PASSWORD_ERROR',
      mysql('ER_ACCESS_DENIED_NO_PASSWORD_ERROR', 1698, "Access denied for user 'a'@'127.0.0.1'"),
      'LOGIN_REFUSED',
    ],
    ['PostgreSQL wrong password', pg('28P01', 'password authentication failed'), 'LOGIN_REFUSED'],
    ['PostgreSQL no pg_hba entry', pg('28000', 'no pg_hba.conf entry'), 'LOGIN_REFUSED'],
    ['MySQL unknown database', mysql('ER_BAD_DB_ERROR', 1049, "Unknown database 'shop'"), 'NO_DATABASE'],
    ['PostgreSQL unknown database', pg('3D000', 'database "shop" does not exist'), 'NO_DATABASE'],
    [
      'MySQL table privilege',
      mysql(
        'ER_TABLEACCESS_DENIED_ERROR',
        1142,
        "SELECT command denied to user 'a'@'h' for table `d`.`tx_record`",
      ),
      'TABLE_ACCESS_DENIED',
    ],
    [
      'PostgreSQL table privilege',
      pg('42501', 'permission denied for table tx_record'),
      'TABLE_ACCESS_DENIED',
    ],
    [
      'MySQL missing table',
      mysql('ER_NO_SUCH_TABLE', 1146, "Table 'd.tx_record' doesn't exist"),
      'NO_SUCH_TABLE',
    ],
    ['PostgreSQL missing table', pg('42P01', 'relation "tx_record" does not exist'), 'NO_SUCH_TABLE'],
    ['a syntax error', mysql('ER_PARSE_ERROR', 1064, 'syntax'), 'OTHER'],
  ])('%s is %s', (_what, err, failure) => {
    expect(failureAny(err)).toBe(failure);
    // The same driver error under TypeORM's QueryFailedError and an SDK StoreError.
    const wrapped = new StoreError('read failed', Object.assign(new Error('q'), { driverError: err }));
    expect(driverErrorOf(wrapped)).toBe(err);
    expect(failureAny(driverErrorOf(wrapped))).toBe(failure);
  });

  it('an SDK error with no driver error under it has none', () => {
    expect(driverErrorOf(new StoreError('read failed', new Error('plain')))).toBeUndefined();
  });
});
