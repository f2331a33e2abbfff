import type { DataSource, EntityManager } from 'typeorm';
import type { BrokerGateway, GatewayConfig, HalfMessage, OutgoingMessage } from '../../../src/broker/gateway';
import type { NewTxRecord, TombstoneOutcome, TxRecordStore, TxStatus } from '../../../src/store/ports';

/** Records every call in order, so tests can assert the producer's protocol sequence. */
export class Journal {
  readonly events: string[] = [];
  add(e: string): void {
    this.events.push(e);
  }
}

export class FakeGateway implements BrokerGateway {
  config: GatewayConfig | undefined;
  sent: OutgoingMessage[] = [];
  ended: Array<{ messageId: string; commit: boolean }> = [];
  failSendAt: number | undefined;
  failEnd = false;
  private n = 0;
  constructor(private readonly journal: Journal) {}
  async start(): Promise<void> {
    this.journal.add('gateway.start');
  }
  async sendHalf(message: OutgoingMessage): Promise<HalfMessage> {
    const i = this.n++;
    if (this.failSendAt === i) {
      this.journal.add(`half.fail#${i}`);
      throw new Error('proxy unreachable');
    }
    this.sent.push(message);
    this.journal.add(`half#${i}`);
    return { messageId: `m${i}`, topic: message.topic };
  }
  async endTransaction(half: HalfMessage, commit: boolean): Promise<void> {
    this.journal.add(`end.${commit ? 'commit' : 'rollback'}:${half.messageId}`);
    if (this.failEnd) throw new Error('end lost');
    this.ended.push({ messageId: half.messageId, commit });
  }
  async send(message: OutgoingMessage): Promise<{ messageId: string }> {
    this.sent.push(message);
    return { messageId: 'n' };
  }
  async shutdown(): Promise<void> {
    this.journal.add('gateway.shutdown');
  }
}

export class FakeStore implements TxRecordStore {
  rows = new Map<string, string>();
  fenceFirst = false;
  insertError: Error | undefined;
  confirmed: string[] = [];
  constructor(private readonly journal: Journal) {}
  async insertCommitted(_m: EntityManager, r: NewTxRecord): Promise<boolean> {
    this.journal.add('db.insert');
    if (this.insertError) throw this.insertError;
    if (this.fenceFirst || this.rows.has(r.txId)) return false;
    this.rows.set(r.txId, 'COMMITTED');
    return true;
  }
  async readStatus(txId: string): Promise<TxStatus | undefined> {
    return this.rows.get(txId) as TxStatus | undefined;
  }
  async insertTombstone(r: NewTxRecord): Promise<TombstoneOutcome> {
    if (this.rows.has(r.txId)) return { kind: 'EXISTS' };
    this.rows.set(r.txId, 'ROLLED_BACK');
    return { kind: 'INSERTED' };
  }
  async markConfirmed(ids: readonly string[]): Promise<void> {
    this.confirmed.push(...ids);
  }
}

export interface FakeDbControl {
  commitError?: Error;
  connectError?: Error;
}

/** Just enough of a DataSource for the producer: query runners that journal their calls. */
export function fakeDataSource(journal: Journal, control: FakeDbControl = {}): DataSource {
  const ds = {
    isInitialized: true,
    options: { type: 'mysql' },
    createQueryRunner() {
      let active = false;
      return {
        manager: { marker: 'manager' } as unknown as EntityManager,
        get isTransactionActive() {
          return active;
        },
        async connect() {
          journal.add('db.connect');
          if (control.connectError) throw control.connectError;
        },
        async startTransaction() {
          journal.add('db.begin');
          active = true;
        },
        async commitTransaction() {
          journal.add('db.commit');
          active = false;
          if (control.commitError) throw control.commitError;
        },
        async rollbackTransaction() {
          journal.add('db.rollback');
          active = false;
        },
        async release() {
          journal.add('db.release');
        },
      };
    },
  };
  return ds as unknown as DataSource;
}

/**
 * The proxy's long polls, for fake consumer gateways: wait() ends at wakeAll() (messages arrived,
 * or the client closed) or after `ms` (the poll's end), whichever comes first.
 */
export class LongPolls {
  private readonly waiting = new Set<() => void>();

  constructor(private readonly ms: number) {}

  /** Polls open now. */
  get open(): number {
    return this.waiting.size;
  }

  wait(): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, this.ms);
      this.waiting.add(done);
    });
  }

  wakeAll(): void {
    for (const done of [...this.waiting]) done();
  }
}
