import type { DataSource, QueryRunner } from 'typeorm';
import { destroyConnection, dialectFor, isLockVictim, type Dialect } from '../store/typeorm/dialect';
import type { ConsumedRow, CursorKey, InboxStore, InboxTransaction } from './inbox';

/** consumed_event and aggregate_cursor through the user's DataSource, in raw SQL. */
export class TypeOrmInboxStore implements InboxStore {
  private readonly dialect: Dialect;

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectFor(dataSource);
  }

  isConflict(err: unknown): boolean {
    return isLockVictim(this.dialect.classify(err));
  }

  async transaction<T>(fn: (tx: InboxTransaction) => Promise<{ commit: boolean; value: T }>): Promise<T> {
    const queryRunner = this.dataSource.createQueryRunner();
    try {
      await queryRunner.connect();
      await queryRunner.startTransaction();
      let outcome: { commit: boolean; value: T };
      try {
        outcome = await fn(this.tx(queryRunner));
      } catch (err) {
        await abandon(queryRunner);
        throw err;
      }
      if (outcome.commit) {
        try {
          await queryRunner.commitTransaction();
        } catch (err) {
          await abandon(queryRunner);
          throw err;
        }
      } else {
        await abandon(queryRunner);
      }
      return outcome.value;
    } finally {
      await queryRunner.release().catch(() => undefined);
    }
  }

  private tx(queryRunner: QueryRunner): InboxTransaction {
    const manager = queryRunner.manager;
    const dialect = this.dialect;
    return {
      manager,
      async insertConsumed(row: ConsumedRow): Promise<boolean> {
        try {
          await manager.query(
            'INSERT INTO consumed_event (consumer_group, event_id, event_type, aggregate_type, aggregate_id, aggregate_version, outcome) VALUES (?, ?, ?, ?, ?, ?, ?)',
            [
              row.consumerGroup,
              row.eventId,
              row.eventType,
              row.aggregateType,
              row.aggregateId,
              row.aggregateVersion,
              'APPLIED',
            ],
          );
          return true;
        } catch (err) {
          if (dialect.classify(err) === 'DUPLICATE_KEY') return false;
          throw err;
        }
      },
      async markOutcome(row, outcome): Promise<void> {
        await manager.query(
          'UPDATE consumed_event SET outcome = ? WHERE consumer_group = ? AND event_id = ?',
          [outcome, row.consumerGroup, row.eventId],
        );
      },
      async lockCursor(key: CursorKey): Promise<number> {
        // An upsert takes the row's exclusive lock directly (INSERT IGNORE would take a shared
        // lock first and invite the duplicate-insert deadlock).
        await manager.query(
          'INSERT INTO aggregate_cursor (consumer_group, aggregate_type, aggregate_id, last_version) VALUES (?, ?, ?, 0) ON DUPLICATE KEY UPDATE last_version = last_version',
          [key.consumerGroup, key.aggregateType, key.aggregateId],
        );
        const rows: Array<{ last_version: string | number }> = await manager.query(
          'SELECT last_version FROM aggregate_cursor WHERE consumer_group = ? AND aggregate_type = ? AND aggregate_id = ? FOR UPDATE',
          [key.consumerGroup, key.aggregateType, key.aggregateId],
        );
        return Number(rows[0]?.last_version ?? 0);
      },
      async advanceCursor(key: CursorKey, version: number, skipped: number): Promise<void> {
        await manager.query(
          `UPDATE aggregate_cursor SET last_version = ?, skipped_versions = skipped_versions + ?, updated_at = ${dialect.nowExpression} WHERE consumer_group = ? AND aggregate_type = ? AND aggregate_id = ?`,
          [version, skipped, key.consumerGroup, key.aggregateType, key.aggregateId],
        );
      },
    };
  }
}

/** Rolls back; if that fails, destroys the connection so it never returns to the pool open. */
async function abandon(queryRunner: QueryRunner): Promise<void> {
  if (!queryRunner.isTransactionActive) return;
  try {
    await queryRunner.rollbackTransaction();
    return;
  } catch {
    // fall through
  }
  try {
    await queryRunner.query('ROLLBACK');
    return;
  } catch {
    // fall through
  }
  destroyConnection(queryRunner);
}
