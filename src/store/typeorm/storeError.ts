import { StoreAccessDeniedError, StoreError } from '../../errors';
import { accessDeniedAny, classifyAny, isRetriableKind } from './dialect';

/**
 * A database failure of the SDK's own statements as a typed error: StoreAccessDeniedError (not
 * retriable, names the missing privilege and table) when the server refused a table privilege,
 * else a StoreError that keeps the cause. Retriable as the dialect classifies the error (a lost
 * connection, a lock victim: yes; a missing table or column, a syntax or access error: no);
 * `retriable` is the answer for an error the dialect cannot classify.
 */
export function toStoreError(context: string, err: unknown, retriable = true): StoreError {
  if (err instanceof StoreError) return err;
  const denied = accessDeniedAny(err);
  if (denied) return new StoreAccessDeniedError(context, denied.privilege, denied.table, denied.column, err);
  return new StoreError(context, err, isRetriableKind(classifyAny(err)) ?? retriable);
}
