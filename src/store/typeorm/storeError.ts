import { StoreAccessDeniedError, StoreError } from '../../errors';
import { mysqlDialect } from './dialect';

/**
 * A database failure of the SDK's own statements as a typed error: StoreAccessDeniedError (not
 * retriable, names the missing privilege and table) when the server refused a privilege, else a
 * StoreError that keeps the cause.
 */
export function toStoreError(context: string, err: unknown, retriable = true): StoreError {
  if (err instanceof StoreError) return err;
  const denied = mysqlDialect.accessDenied(err);
  if (denied) return new StoreAccessDeniedError(context, denied.privilege, denied.table, denied.column, err);
  return new StoreError(context, err, retriable);
}
