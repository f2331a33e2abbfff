/**
 * The join mode's world on top of scheduler.ts: the caller's own transaction on a TypeORM
 * MysqlQueryRunner whose statements are scheduling points (its transaction logic — savepoints,
 * transactionDepth, isTransactionActive, the subscriber events — is TypeORM's own code), several
 * half messages of one txId, and the flows of the caller's process: the caller ('P') and what
 * TypeORM's transaction events start without awaiting ('Pe': the fresh read and EndTransaction).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { EntityManager, type DataSource, type EntitySubscriberInterface } from 'typeorm';
import type { MysqlDriver } from 'typeorm/driver/mysql/MysqlDriver';
import { MysqlQueryRunner } from 'typeorm/driver/mysql/MysqlQueryRunner';
import type { BrokerGateway, GatewayConfig, HalfMessage, OutgoingMessage } from '../../../src/broker/gateway';
import type { CheckBackMessage, TransactionResolution } from '../../../src/checkback/resolution';
import type { TxRecordStore, TxStatus } from '../../../src/store/ports';
import {
  World,
  dbError,
  type BrokerState,
  type Reply,
  type Scheduler,
  type ScheduledTxRecordStore,
} from './scheduler';

/** The caller's flow and the flow its transaction events start (both in the caller's process). */
export const CALLER = 'P';
export const AFTER_END = 'Pe';

export interface Half {
  readonly id: string;
  readonly message: OutgoingMessage;
  /** The caller's savepoint depth when the half was sent (its publish call's level). */
  readonly depth: number;
  state: BrokerState;
  readonly sent: Set<Reply>;
  /** Its publish call was rolled back to a savepoint (its outbox rows are gone with it). */
  undone: boolean;
}

export class JoinWorld extends World {
  readonly halves: Half[] = [];
  /** The caller's current savepoint depth (TypeORM's transactionDepth). */
  callerDepth: () => number = () => 0;
  /** The depth the caller held the row at (lowered when that savepoint is released). */
  rowDepth: number | undefined;
  /** Check-backs the broker may start beyond its budget (the terminal drain). */
  extraChecks = 0;

  override lock(actor: string, value: TxStatus): void {
    super.lock(actor, value);
    if (actor === CALLER) this.rowDepth = this.callerDepth();
  }

  override end(actor: string, commit: boolean): void {
    super.end(actor, commit);
    if (this.holder === undefined) this.rowDepth = undefined;
  }

  /** RELEASE SAVEPOINT: what was written inside it belongs to the enclosing level. */
  releaseSavepoint(depth: number): void {
    if (this.holder === CALLER) this.rowDepth = Math.min(this.rowDepth!, depth);
  }

  /** ROLLBACK TO SAVEPOINT: the row inserted inside it is gone, and InnoDB releases its lock. */
  rollbackToSavepoint(depth: number): void {
    if (this.holder === CALLER && this.rowDepth! > depth) {
      this.holder = undefined;
      this.pending = undefined;
      this.rowDepth = undefined;
    }
    for (const h of this.halves) if (h.depth > depth && !h.undone && this.callerOpen) h.undone = true;
  }

  /** The caller's transaction is open (halves sent in it can still be undone by a savepoint). */
  callerOpen = false;

  private readonly checksByHalf = new Map<string, number>();

  /** Check-backs the broker started for half `id`. */
  checksOf(id: string): number {
    return this.checksByHalf.get(id) ?? 0;
  }

  countCheck(id: string): void {
    this.checksByHalf.set(id, this.checksOf(id) + 1);
  }

  deliverTo(id: string, reply: Reply): void {
    const half = this.halves.find((h) => h.id === id);
    if (!half) throw new Error(`no half message ${id}`);
    half.sent.add(reply);
    if (half.state === 'HALF') half.state = reply === 'COMMIT' ? 'DELIVERED' : 'DISCARDED';
  }

  override key(): string {
    const halves = this.halves
      .map(
        (h) =>
          `${h.id}@${h.depth}${h.undone ? '(undone)' : ''}=${h.state}/${[...h.sent].sort().join('+')}` +
          ` checks=${this.checksOf(h.id)}`,
      )
      .join(',');
    const depth = this.rowDepth === undefined ? '' : ` rowDepth=${this.rowDepth}`;
    return `${super.key()}${depth} halves=[${halves}] extra=${this.extraChecks}`;
  }
}

/** Which flow of the caller's process is running (TypeORM's events run in AFTER_END). */
export const flows = new AsyncLocalStorage<string>();
export const currentFlow = (): string => flows.getStore() ?? CALLER;

/** The broker for one process; calls are points of the flow that makes them. */
export class JoinGateway implements BrokerGateway {
  private config: GatewayConfig | undefined;
  /** EndTransaction calls made together (endAll's Promise.allSettled): one move decides them all. */
  private batch:
    | { actor: string; commit: boolean; members: Array<{ id: string; done: (ok: boolean) => void }> }
    | undefined;

  constructor(
    private readonly world: JoinWorld,
    private readonly sched: Scheduler,
    private readonly actor: () => string,
    /** A half message stored by the proxy whose ack is lost (off to bound a run). */
    private readonly ackLost = true,
  ) {}

  readonly factory = (config: GatewayConfig): BrokerGateway => {
    this.config = config;
    return this;
  };

  async start(): Promise<void> {}

  sendHalf(message: OutgoingMessage): Promise<HalfMessage> {
    const w = this.world;
    const accept = (): HalfMessage => {
      const id = `m${w.halves.length}`;
      w.halves.push({ id, message, depth: w.callerDepth(), state: 'HALF', sent: new Set(), undone: false });
      w.half = message;
      return { messageId: id, topic: message.topic };
    };
    return this.sched.point(this.actor(), 'send half', () => [
      { name: 'accepted', apply: accept },
      {
        name: 'rejected',
        apply: () => {
          throw new Error('proxy refused the half message (simulated)');
        },
      },
      ...(this.ackLost
        ? [
            {
              name: 'accepted, ack lost',
              apply: (): HalfMessage => {
                accept();
                throw new Error('DEADLINE_EXCEEDED after the proxy stored the half message (simulated)');
              },
            },
          ]
        : []),
    ]);
  }

  endTransaction(half: HalfMessage, commit: boolean): Promise<void> {
    const actor = this.actor();
    return new Promise<void>((resolve, reject) => {
      const member = {
        id: half.messageId,
        done: (ok: boolean) => (ok ? resolve() : reject(new Error('EndTransaction lost (simulated)'))),
      };
      const open = this.batch;
      if (open && open.actor === actor && open.commit === commit) {
        open.members.push(member);
        return;
      }
      const batch = { actor, commit, members: [member] };
      this.batch = batch;
      const reply: Reply = commit ? 'COMMIT' : 'ROLLBACK';
      const outcomes = (n: number): boolean[][] =>
        n === 0
          ? [[]]
          : outcomes(n - 1).flatMap((rest) => [
              [true, ...rest],
              [false, ...rest],
            ]);
      void this.sched
        .point<boolean[]>(actor, `EndTransaction ${reply}`, () =>
          outcomes(batch.members.length).map((oks) => ({
            name: batch.members.map((m, i) => `${m.id} ${oks[i] ? 'delivered' : 'lost'}`).join(', '),
            apply: () => {
              if (this.batch === batch) this.batch = undefined;
              batch.members.forEach((m, i) => oks[i] && this.world.deliverTo(m.id, reply));
              return oks;
            },
          })),
        )
        .then((oks) => batch.members.forEach((m, i) => m.done(oks[i]!)));
    });
  }

  async send(): Promise<{ messageId: string }> {
    throw new Error('normal sends are not part of this world');
  }

  async shutdown(): Promise<void> {}

  /** The broker asks this instance about half `id`: UNKNOWN or a throw sends no reply. */
  async checkBack(id: string, message: CheckBackMessage): Promise<void> {
    const handler = this.config?.onCheckBack;
    if (!handler) throw new Error('no check-back handler declared');
    const answer: TransactionResolution = await handler(message).catch(() => 'UNKNOWN' as const);
    if (answer === 'UNKNOWN') return;
    const reply: Reply = answer;
    await this.sched.point(this.actor(), `reply ${reply}`, () => [
      { name: 'delivered', apply: () => this.world.deliverTo(id, reply) },
      { name: 'lost', apply: () => undefined },
    ]);
  }
}

/** The tx_record primitives of the caller's process, on the flow that calls them. */
export function flowStore(stores: Record<string, ScheduledTxRecordStore>): TxRecordStore {
  const store = (): ScheduledTxRecordStore => {
    const s = stores[currentFlow()];
    if (!s) throw new Error(`no tx_record store for flow ${currentFlow()}`);
    return s;
  };
  return {
    insertCommitted: (manager, record) => store().insertCommitted(manager, record),
    readStatus: (txId) => store().readStatus(txId),
    insertTombstone: (record, ms) => store().insertTombstone(record, ms),
    markConfirmed: () => store().markConfirmed(),
  };
}

/**
 * The DataSource's subscriber list: TypeORM's Broadcaster calls each subscriber through
 * `subscribers.forEach`; here each call runs in the AFTER_END flow, so what a handler starts
 * without awaiting is scheduled as that flow (the handler itself is called as TypeORM calls it).
 */
class FlowSubscribers extends Array<EntitySubscriberInterface> {
  static override get [Symbol.species](): ArrayConstructor {
    return Array;
  }

  /** No subscriber is called (a transaction ended where TypeORM's events do not reach it). */
  silent = false;

  override forEach(
    callback: (value: EntitySubscriberInterface, index: number, array: EntitySubscriberInterface[]) => void,
    thisArg?: unknown,
  ): void {
    if (this.silent) return;
    [...this].forEach((subscriber, i) =>
      flows.run(AFTER_END, () => callback.call(thisArg, subscriber, i, this)),
    );
  }
}

export interface CallerDbOptions {
  /**
   * Adds a COMMIT that returns success although the transaction rolled back (PostgreSQL answers
   * the COMMIT of an aborted transaction with ROLLBACK; TypeORM reports it committed).
   */
  commitCanRollBack?: boolean;
  /**
   * TypeORM's transaction events never reach the producer (the after-commit callback is lost while
   * the process lives on): the producer learns nothing; the check-back must resolve everything.
   */
  eventsLost?: boolean;
}

/** What the caller's connection did, for the invariants. */
export interface CallerConnection {
  /** The outermost COMMIT was sent (the caller cannot know whether it committed if it failed). */
  commitSent: boolean;
}

/**
 * The caller's DataSource: `manager.transaction(...)` is TypeORM's EntityManager.transaction on
 * a real MysqlQueryRunner whose `query` is the scheduled database (START TRANSACTION, SAVEPOINT,
 * RELEASE SAVEPOINT and ROLLBACK TO SAVEPOINT apply at once; COMMIT and ROLLBACK are points).
 */
export function callerDataSource(
  world: JoinWorld,
  sched: Scheduler,
  options: CallerDbOptions = {},
): { dataSource: DataSource; connection: CallerConnection } {
  const connection: CallerConnection = { commitSent: false };
  const subscribers = new FlowSubscribers();
  subscribers.silent = options.eventsLost ?? false;
  const dataSource = {
    isInitialized: true,
    options: { type: 'mysql' },
    subscribers,
  } as unknown as DataSource & { manager: EntityManager };

  class ScheduledQueryRunner extends MysqlQueryRunner {
    /** The server's view (a transaction is open) and the connection's (it is usable). */
    private open = false;
    private alive = true;

    constructor() {
      super({ connection: dataSource } as unknown as MysqlDriver, 'master');
      world.callerDepth = () => this.transactionDepth;
    }

    override async connect(): Promise<unknown> {
      return undefined;
    }

    override async release(): Promise<void> {
      this.isReleased = true;
      // mysql2 pools a live connection as it is (resetOnRelease is off): an open transaction stays open.
      if (this.alive && this.open) world.leaks.add(CALLER);
    }

    /** Typed as TypeORM's overloads want (it resolves to an empty result). */
    override query(sql: string): Promise<never> {
      return this.statement(sql) as Promise<never>;
    }

    private statement(sql: string): Promise<unknown> {
      if (!this.alive)
        return Promise.reject(new Error("Can't add new command when connection is in closed state"));
      const statement = sql.trim().toUpperCase();
      const savepoint = /^(RELEASE SAVEPOINT|ROLLBACK TO SAVEPOINT|SAVEPOINT) TYPEORM_(\d+)$/.exec(statement);
      const done = Promise.resolve([]);
      if (statement === 'START TRANSACTION') {
        this.open = true;
        world.callerOpen = true;
        return done;
      }
      if (savepoint) {
        const depth = Number(savepoint[2]);
        if (savepoint[1] === 'RELEASE SAVEPOINT') world.releaseSavepoint(depth);
        if (savepoint[1] === 'ROLLBACK TO SAVEPOINT') world.rollbackToSavepoint(depth);
        return done;
      }
      const ended = (commit: boolean) => (): unknown[] => {
        world.end(CALLER, commit);
        world.callerOpen = false;
        this.open = false;
        return [];
      };
      const lost = (commit: boolean) => (): never => {
        ended(commit)();
        this.alive = false;
        throw dbError('ECONNRESET', 0);
      };
      if (statement === 'COMMIT') {
        if (this.transactionDepth <= 1) connection.commitSent = true;
        return sched
          .point<unknown>(CALLER, 'COMMIT', () => [
            { name: 'ok', apply: ended(true) },
            { name: 'ambiguous, did commit', apply: lost(true) },
            { name: 'ambiguous, did not commit', apply: lost(false) },
            ...(options.commitCanRollBack ? [{ name: 'reports ok, rolled back', apply: ended(false) }] : []),
          ])
          .then(() =>
            // Crashing here: the COMMIT is durable and the process dies before TypeORM's
            // afterTransactionCommit event runs (the after-commit callback is lost).
            sched.point<unknown>(CALLER, 'COMMIT returned', () => [
              { name: 'after-commit events run', apply: () => [] },
            ]),
          );
      }
      if (statement === 'ROLLBACK') {
        return sched.point<unknown>(CALLER, 'ROLLBACK', () => [
          { name: 'ok', apply: ended(false) },
          { name: 'connection lost (InnoDB rolls back)', apply: lost(false) },
        ]);
      }
      return Promise.reject(new Error(`this fake connection does not run ${sql}`));
    }
  }

  Object.assign(dataSource, {
    createQueryRunner: () => {
      const runner = new ScheduledQueryRunner();
      new EntityManager(dataSource, runner);
      return runner;
    },
  });
  Object.assign(dataSource, { manager: new EntityManager(dataSource) });
  return { dataSource, connection };
}
