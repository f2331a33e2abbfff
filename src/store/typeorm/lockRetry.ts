import { isLockVictim, type DbErrorKind, type Dialect } from './dialect';

/**
 * Runs `fn` (one statement or one short transaction) again while it fails as a deadlock or
 * lock-wait victim: InnoDB rolled it back whole, so running it again is safe. At most `attempts`
 * runs; `beforeRerun` is awaited before each re-run (log, back off). Any other failure, and the
 * last attempt's, is thrown as it is: the caller types it.
 */
export async function rerunLockVictims<T>(
  dialect: Dialect,
  attempts: number,
  fn: () => Promise<T>,
  beforeRerun: (attempt: number, kind: DbErrorKind) => void | Promise<void>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const kind = dialect.classify(err);
      if (attempt >= attempts || !isLockVictim(kind)) throw err;
      await beforeRerun(attempt, kind);
    }
  }
}
