import { InvalidMessageError } from '../../errors';
import type { DataSource, EntityManager } from 'typeorm';
import type {
  ClaimedOutboxEvent,
  ClaimOptions,
  ClaimUnconfirmedOptions,
  NewOutboxEvent,
  OutboxStore,
} from '../ports';
import { dialectFor, type Dialect, type DialectName } from './dialect';
import { mysqlOutboxSql } from './mysql/outboxSql';
import { postgresOutboxSql } from './postgres/outboxSql';
import { execute, type ClaimedRow, type OutboxSql, type Statement } from './statements';

const OUTBOX_SQL: Record<DialectName, OutboxSql> = { mysql: mysqlOutboxSql, postgres: postgresOutboxSql };

/** The outbox_event statements of a database. */
export function outboxSqlFor(dialect: Dialect): OutboxSql {
  return OUTBOX_SQL[dialect.name];
}

/**
 * outbox_event through the user's DataSource, in raw SQL: the statements of its database
 * (mysql/outboxSql.ts, postgres/outboxSql.ts), the transactions and row mapping here. Every relay
 * statement is a range read on (status, next_attempt_at, event_id) or a PK update.
 */
export class TypeOrmOutboxStore implements OutboxStore {
  private readonly dialect: Dialect;
  private readonly sql: OutboxSql;

  constructor(private readonly dataSource: DataSource) {
    this.dialect = dialectFor(dataSource);
    this.sql = outboxSqlFor(this.dialect);
  }

  async insertEvents(manager: EntityManager, events: readonly NewOutboxEvent[]): Promise<void> {
    if (events.length === 0) return;
    try {
      await execute(manager, this.sql.insertEvents(events));
    } catch (err) {
      if (this.dialect.classify(err) !== 'DUPLICATE_KEY') throw err;
      // An eventId, or an aggregate version, that was already published: a caller bug, not a retry case.
      throw new InvalidMessageError(
        'events',
        this.sql.duplicateKey(err) ?? '(duplicate key)',
        'events whose eventId and (aggregateType, aggregateId, aggregateVersion) were not published before',
        err,
      );
    }
  }

  async markConfirmed(eventIds: readonly string[]): Promise<void> {
    if (eventIds.length === 0) return;
    // NEW too: a row promoted by the discard reconciliation whose commit was confirmed late.
    await execute(this.dataSource, this.sql.markConfirmed(eventIds));
  }

  claim({ limit, leaseMs, owner, topics }: ClaimOptions): Promise<ClaimedOutboxEvent[]> {
    return this.lockAndLease(this.sql.selectDue(topics, limit), (ids) =>
      this.sql.leaseDue(ids, owner, leaseMs),
    );
  }

  claimUnconfirmed({
    producerGroup,
    horizonMs,
    limit,
    leaseMs,
    owner,
    topics,
  }: ClaimUnconfirmedOptions): Promise<ClaimedOutboxEvent[]> {
    return this.lockAndLease(this.sql.selectUnconfirmed({ horizonMs, topics, limit, producerGroup }), (ids) =>
      this.sql.leaseUnconfirmed(ids, owner, leaseMs),
    );
  }

  /**
   * One claim transaction of two statements: `select` locks the rows it returns (whole
   * ClaimedRows, FOR UPDATE SKIP LOCKED), `lease` leases them (it changes none of their columns).
   * READ COMMITTED, pinned: the claim locks only the rows it takes. Under REPEATABLE READ its
   * range scan also took gap locks on idx_outbox_status_next (InnoDB), where producers insert
   * their NEW rows: the two deadlocked now and then.
   */
  private async lockAndLease(
    select: Statement,
    lease: (eventIds: string[]) => Statement,
  ): Promise<ClaimedOutboxEvent[]> {
    const rows = await this.dataSource.transaction('READ COMMITTED', async (manager) => {
      const locked = (await execute<ClaimedRow>(manager, select)).rows;
      if (locked.length > 0) await execute(manager, lease(locked.map((r) => r.event_id)));
      return locked;
    });
    return rows.map(claimedEvent);
  }

  async releaseUnconfirmed(eventId: string, owner: string, error: string, retryInMs: number): Promise<void> {
    // Fenced by owner, as markFailed: a holder whose lease expired must not reschedule another's.
    await execute(this.dataSource, this.sql.releaseUnconfirmed(eventId, owner, error, retryInMs));
  }

  async markSent(eventId: string): Promise<void> {
    // Not fenced by owner: the message is on the broker whoever holds the lease now.
    await execute(this.dataSource, this.sql.markSent(eventId));
  }

  async markSentMany(eventIds: readonly string[]): Promise<void> {
    if (eventIds.length === 0) return;
    await execute(this.dataSource, this.sql.markSentMany(eventIds));
  }

  async markFailed(
    eventId: string,
    owner: string,
    error: string,
    retryInMs: number,
    dead: boolean,
  ): Promise<void> {
    // Fenced by owner: a relay whose lease expired must not overwrite the new holder's schedule.
    await execute(this.dataSource, this.sql.markFailed(eventId, owner, error, retryInMs, dead));
  }

  async promoteUnconfirmed(horizonMs: number, limit: number, topics: readonly string[]): Promise<number> {
    return this.dataSource.transaction('READ COMMITTED', async (manager) => {
      const ids = await execute<{ event_id: string }>(
        manager,
        this.sql.selectUnconfirmed({ horizonMs, topics, limit }),
      );
      if (ids.rows.length === 0) return 0;
      await execute(manager, this.sql.promote(ids.rows.map((r) => r.event_id)));
      return ids.rows.length;
    });
  }

  async replayDead(eventIds?: readonly string[]): Promise<number> {
    return (await execute(this.dataSource, this.sql.replayDead(eventIds))).affected;
  }
}

function claimedEvent(r: ClaimedRow): ClaimedOutboxEvent {
  return {
    eventId: r.event_id,
    txId: r.tx_id,
    topic: r.topic,
    ...(r.tag !== null ? { tag: r.tag } : {}),
    keys: JSON.parse(r.keys) as string[],
    properties: JSON.parse(r.properties) as Record<string, string>,
    body: Buffer.from(r.payload),
    ...(r.aggregate_id !== null ? { aggregateId: r.aggregate_id } : {}),
    attempts: Number(r.attempts),
  };
}
