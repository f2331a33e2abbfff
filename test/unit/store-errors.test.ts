import { StoreAccessDeniedError, StoreError } from '../../src';
import { mysqlDialect } from '../../src/store/typeorm/dialect';
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
