import type { DataSource, QueryRunner } from 'typeorm';
import { InvalidOptionError } from '../../errors';

export type DbErrorKind = 'DUPLICATE_KEY' | 'LOCK_WAIT_TIMEOUT' | 'DEADLOCK' | 'OTHER';

/** Per-database SQL and error classification. One implementation per supported database. */
export interface Dialect {
  readonly name: 'mysql';
  placeholder(index: number): string;
  nowExpression: string;
  classify(err: unknown): DbErrorKind;
  /** Runs fn with the session's row-lock wait bounded to about `ms`, then restores the session. */
  withLockWait<T>(queryRunner: QueryRunner, ms: number, fn: () => Promise<T>): Promise<T>;
}

function driverError(err: unknown): { code?: unknown; errno?: unknown } {
  if (typeof err !== 'object' || err === null) return {};
  const inner = (err as { driverError?: unknown }).driverError;
  return (typeof inner === 'object' && inner !== null ? inner : err) as { code?: unknown; errno?: unknown };
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
    return 'OTHER';
  },
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
