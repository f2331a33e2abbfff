import type { DataSource } from 'typeorm';
import { claimInTwoSteps } from '../cursor';
import type { ConsumedRow, CursorKey, InboxStore, InboxTransaction } from '../ports';

const key = (k: CursorKey) => JSON.stringify([k.consumerGroup, k.aggregateType, k.aggregateId]);

/**
 * The consumer's dedupe (consumed_event) and order (aggregate_cursor) rows kept in memory, for
 * databases the SDK's inbox SQL does not support (SQLite). The handler still runs in a real
 * transaction on your DataSource; the rows are staged and applied only when it commits, so the
 * decisions are those of the real store. One transaction at a time (SQLite has one writer too).
 */
export class MemoryInboxStore implements InboxStore {
  private readonly consumed = new Set<string>();
  private readonly cursors = new Map<string, number>();
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly dataSource: DataSource) {}

  isConflict(): boolean {
    return false;
  }

  /** Event ids recorded as consumed by `consumerGroup`. */
  consumedIds(consumerGroup: string): string[] {
    const prefix = `${consumerGroup}\u0000`;
    return [...this.consumed].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
  }

  transaction<T>(fn: (tx: InboxTransaction) => Promise<{ commit: boolean; value: T }>): Promise<T> {
    const run = this.queue.then(() => this.run(fn));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async run<T>(fn: (tx: InboxTransaction) => Promise<{ commit: boolean; value: T }>): Promise<T> {
    const queryRunner = this.dataSource.createQueryRunner();
    const consumed = new Set<string>();
    const cursors = new Map<string, number>();
    try {
      await queryRunner.connect();
      await queryRunner.startTransaction();
      let outcome: { commit: boolean; value: T };
      const tx: InboxTransaction = {
        manager: queryRunner.manager,
        insertConsumed: async (row: ConsumedRow) => {
          const id = `${row.consumerGroup}\u0000${row.eventId}`;
          if (this.consumed.has(id) || consumed.has(id)) return false;
          consumed.add(id);
          return true;
        },
        markOutcome: async () => undefined,
        lockCursor: async (k: CursorKey) => cursors.get(key(k)) ?? this.cursors.get(key(k)) ?? 0,
        advanceCursor: async (k: CursorKey, version: number) => {
          cursors.set(key(k), version);
        },
        claimVersion: (k: CursorKey, version: number, acceptGap: boolean) =>
          claimInTwoSteps(tx, k, version, acceptGap),
      };
      try {
        outcome = await fn(tx);
      } catch (err) {
        await queryRunner.rollbackTransaction().catch(() => undefined);
        throw err;
      }
      if (!outcome.commit) {
        await queryRunner.rollbackTransaction();
        return outcome.value;
      }
      await queryRunner.commitTransaction();
      for (const id of consumed) this.consumed.add(id);
      for (const [k, v] of cursors) this.cursors.set(k, v);
      return outcome.value;
    } finally {
      await queryRunner.release().catch(() => undefined);
    }
  }
}
