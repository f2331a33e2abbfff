import type { DataSource, QueryRunner } from 'typeorm';
import type { ConsumedRow, CursorKey, InboxStore, InboxTransaction } from '../ports';
import { dialectFor, isLockVictim, type Dialect, type DialectName } from './dialect';
import { mysqlInboxSql } from './mysql/inboxSql';
import { postgresInboxSql } from './postgres/inboxSql';
import { abandonTransaction, execute, type InboxSql } from './statements';
import { claimInTwoSteps } from '../cursor';

const INBOX_SQL: Record<DialectName, InboxSql> = { mysql: mysqlInboxSql, postgres: postgresInboxSql };

/**
 * consumed_event and aggregate_cursor through the user's DataSource, in raw SQL: the statements
 * of its database (mysql/inboxSql.ts, postgres/inboxSql.ts), the transaction here.
 */
export class TypeOrmInboxStore implements InboxStore {
  private readonly dialect: Dialect;
  private readonly sql: InboxSql;

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectFor(dataSource);
    this.sql = INBOX_SQL[this.dialect.name];
  }

  isConflict(err: unknown): boolean {
    return isLockVictim(this.dialect.classify(err));
  }

  async transaction<T>(fn: (tx: InboxTransaction) => Promise<{ commit: boolean; value: T }>): Promise<T> {
    const queryRunner = this.dataSource.createQueryRunner();
    try {
      await queryRunner.connect();
      await queryRunner.startTransaction(this.sql.isolation);
      let outcome: { commit: boolean; value: T };
      try {
        outcome = await fn(this.tx(queryRunner));
      } catch (err) {
        await abandonTransaction(queryRunner);
        throw err;
      }
      if (outcome.commit) {
        try {
          await queryRunner.commitTransaction();
        } catch (err) {
          await abandonTransaction(queryRunner);
          throw err;
        }
      } else {
        await abandonTransaction(queryRunner);
      }
      return outcome.value;
    } finally {
      await queryRunner.release().catch(() => undefined);
    }
  }

  private tx(queryRunner: QueryRunner): InboxTransaction {
    const manager = queryRunner.manager;
    const { dialect, sql } = this;
    const tx: InboxTransaction = {
      manager,
      async insertConsumed(row: ConsumedRow): Promise<boolean> {
        try {
          return sql.inserted(await execute(manager, sql.insertConsumed(row)));
        } catch (err) {
          if (dialect.classify(err) === 'DUPLICATE_KEY') return false;
          throw err;
        }
      },
      async markOutcome(row, outcome): Promise<void> {
        await execute(manager, sql.markOutcome(row, outcome));
      },
      async lockCursor(key: CursorKey): Promise<number> {
        return sql.cursorVersion(await execute(manager, sql.lockCursor(key)));
      },
      async advanceCursor(key: CursorKey, version: number, skipped: number): Promise<void> {
        await execute(manager, sql.advanceCursor(key, version, skipped));
      },
      async claimVersion(key: CursorKey, version: number, acceptGap: boolean): Promise<number> {
        if (sql.claimVersion)
          return sql.cursorVersion(await execute(manager, sql.claimVersion(key, version, acceptGap)));
        return claimInTwoSteps(tx, key, version, acceptGap);
      },
    };
    return tx;
  }
}
