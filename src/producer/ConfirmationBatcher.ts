import { errorFields, type Logger } from '../util/logger';

/**
 * Collects txIds whose broker commit was acknowledged and records them in batches, off the
 * hot path. Losing a batch is harmless: an unconfirmed COMMITTED row is only re-checked by the
 * discard reconciliation, which republishes with the same eventIds (consumers dedupe).
 */
export class ConfirmationBatcher {
  private pending: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly write: (txIds: readonly string[]) => Promise<void>,
    private readonly logger: Logger,
    private readonly maxBatch = 200,
    // A confirmation only needs to land well inside the check-back horizon (tens of seconds):
    // a 1 s window makes batches large (one UPDATE per 200 transactions under load) instead of
    // an UPDATE every 100 ms for a handful of rows.
    private readonly delayMs = 1000,
  ) {}

  add(txId: string): void {
    this.pending.push(txId);
    if (this.pending.length >= this.maxBatch) {
      void this.flush();
    } else if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), this.delayMs);
      this.timer.unref();
    }
  }

  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.pending.length === 0) return this.flushing;
    const batch = this.pending;
    this.pending = [];
    this.flushing = this.flushing.then(() =>
      this.write(batch).catch((err: unknown) =>
        this.logger.warn(
          { ...errorFields(err), count: batch.length },
          'could not record broker confirmations',
        ),
      ),
    );
    return this.flushing;
  }
}
