import type { EntityManager } from 'typeorm';
import type {
  ClaimedOutboxEvent,
  ClaimOptions,
  ClaimUnconfirmedOptions,
  NewOutboxEvent,
  OutboxStore,
} from '../../../src/store/ports';

/** An in-memory outbox: claim takes due NEW rows, in order, as the SQL does. */
export class FakeOutboxStore implements OutboxStore {
  rows = new Map<
    string,
    NewOutboxEvent & {
      attempts: number;
      lastError?: string;
      dueAt: number;
      leaseUntil?: number;
      owner?: string;
    }
  >();
  statuses = new Map<string, string>();
  now = 0;
  async insertEvents(_m: EntityManager, events: readonly NewOutboxEvent[]): Promise<void> {
    for (const e of events) {
      this.rows.set(e.eventId, { ...e, attempts: 0, dueAt: this.now });
      this.statuses.set(e.eventId, e.status);
    }
  }
  async markConfirmed(ids: readonly string[]): Promise<void> {
    for (const id of ids) if (this.statuses.get(id) !== 'DEAD') this.statuses.set(id, 'SENT');
  }
  async claim({ limit, leaseMs }: ClaimOptions): Promise<ClaimedOutboxEvent[]> {
    const due = [...this.rows.values()].filter(
      (r) => this.statuses.get(r.eventId) === 'NEW' && r.dueAt <= this.now,
    );
    return due.slice(0, limit).map((r) => {
      r.dueAt = this.now + leaseMs;
      return claimed(r);
    });
  }
  async markSent(id: string): Promise<void> {
    if (['NEW', 'IN_FLIGHT'].includes(this.statuses.get(id) ?? '')) this.statuses.set(id, 'SENT');
  }
  async markSentMany(ids: readonly string[]): Promise<void> {
    for (const id of ids) await this.markSent(id);
  }
  /** As the SQL: IN_FLIGHT rows inserted at least horizonMs ago, not leased (group check left out). */
  async claimUnconfirmed({
    horizonMs,
    limit,
    leaseMs,
    owner,
  }: ClaimUnconfirmedOptions): Promise<ClaimedOutboxEvent[]> {
    const due = [...this.rows.values()].filter(
      (r) =>
        this.statuses.get(r.eventId) === 'IN_FLIGHT' &&
        r.dueAt <= this.now - horizonMs &&
        (r.leaseUntil === undefined || r.leaseUntil <= this.now),
    );
    return due.slice(0, limit).map((r) => {
      r.leaseUntil = this.now + leaseMs;
      r.owner = owner;
      return claimed(r);
    });
  }
  async releaseUnconfirmed(id: string, owner: string, error: string, retryInMs: number): Promise<void> {
    const r = this.rows.get(id)!;
    if (this.statuses.get(id) !== 'IN_FLIGHT' || r.owner !== owner) return;
    r.attempts++;
    r.lastError = error;
    r.leaseUntil = this.now + retryInMs;
    r.owner = undefined;
  }
  async markFailed(id: string, _o: string, error: string, retryInMs: number, dead: boolean): Promise<void> {
    const r = this.rows.get(id)!;
    r.attempts++;
    r.lastError = error;
    r.dueAt = this.now + retryInMs;
    this.statuses.set(id, dead ? 'DEAD' : 'NEW');
  }
  async promoteUnconfirmed(): Promise<number> {
    return 0;
  }
  async replayDead(): Promise<number> {
    let n = 0;
    for (const [id, s] of this.statuses) {
      if (s === 'DEAD') {
        this.statuses.set(id, 'NEW');
        this.rows.get(id)!.attempts = 0;
        n++;
      }
    }
    return n;
  }
}

/** A row as a claim returns it (a copy). */
function claimed(r: NewOutboxEvent & { attempts: number }): ClaimedOutboxEvent {
  return {
    eventId: r.eventId,
    txId: r.txId,
    topic: r.topic,
    ...(r.tag !== undefined ? { tag: r.tag } : {}),
    keys: [...r.keys],
    properties: { ...r.properties },
    body: r.body,
    ...(r.aggregateId ? { aggregateId: r.aggregateId } : {}),
    attempts: r.attempts,
  };
}
