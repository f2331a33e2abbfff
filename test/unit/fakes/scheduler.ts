/**
 * A deterministic scheduler for async code, an InnoDB-like world for one txId, and instrumented
 * fakes (gateway, tx_record store, DataSource) that run the real producer and check-back code on
 * it. Every operation an actor performs on the world is a `point`: the actor parks there until the
 * oracle picks one of its enabled choices. Crashes and broker asks are moves too. Exploration
 * re-runs the real code from scratch for every prefix of moves (replay): no real state is copied.
 */
import type { DataSource, EntityManager } from 'typeorm';
import type { BrokerGateway, GatewayConfig, HalfMessage, OutgoingMessage } from '../../../src/broker/gateway';
import {
  TX_ID_PROPERTY,
  TX_ORIGIN_PROPERTY,
  type CheckBackMessage,
  type TransactionResolution,
} from '../../../src/checkback/resolution';
import type { NewTxRecord, TombstoneOutcome, TxRecordStore, TxStatus } from '../../../src/store/ports';

/**
 * One possible outcome of a point. `apply` changes the world; what it returns (or throws) resumes
 * the actor. The name must determine that result: actors' trails of names stand for their state.
 */
export interface Choice<T> {
  readonly name: string;
  readonly apply: () => T;
}

/** A move that is not an actor resuming: the environment acting (the broker asks, the pool hands out a connection). */
export interface EnvironmentMove {
  readonly id: string;
  readonly run: () => void;
}

interface Parked {
  readonly label: string;
  readonly choices: () => ReadonlyArray<Choice<unknown>>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

interface Move {
  readonly id: string;
  readonly run: () => void;
}

/** Rounds of setImmediate after which an actor that reached no point counts as stuck. */
const MAX_SETTLE_ROUNDS = 50;
/** Rounds of setImmediate a resumed detached actor gets to reach its next point or its end. */
const DETACHED_SETTLE_ROUNDS = 3;

export class Scheduler {
  private readonly parked = new Map<string, Parked>();
  private readonly running = new Set<string>();
  private readonly trails = new Map<string, string[]>();
  private readonly crashHandlers = new Map<string, () => void>();
  private readonly sources: Array<() => EnvironmentMove[]> = [];
  private readonly faults: unknown[] = [];
  /** Actors whose code starts inside another actor's callback (see `detached`). */
  private readonly detachedActors = new Set<string>();
  /** Detached actors resumed by the last move: they run until their next point or their end. */
  private readonly resumedDetached = new Set<string>();
  private background = 0;

  /** Parks `actor` at `label` until the oracle picks one of `choices()` (computed when moves are listed). */
  point<T>(actor: string, label: string, choices: () => ReadonlyArray<Choice<T>>): Promise<T> {
    if (this.parked.has(actor)) throw new Error(`${actor} reached "${label}" while already parked elsewhere`);
    const detached = this.detachedActors.has(actor);
    if (!this.running.has(actor) && !detached)
      throw new Error(`${actor} reached "${label}" without being scheduled`);
    // A detached actor reaching a point without having been resumed starts a new flow.
    if (detached && !this.resumedDetached.delete(actor)) this.trails.set(actor, []);
    return new Promise<T>((resolve, reject) => {
      this.running.delete(actor);
      this.parked.set(actor, { label, choices, resolve: resolve as (value: unknown) => void, reject });
    });
  }

  /** Starts `body` as `actor`. With `onCrash`, the actor may crash at any of its points. */
  spawn(actor: string, body: () => Promise<void>, onCrash?: () => void): void {
    if (this.isBusy(actor)) throw new Error(`${actor} spawned while busy`);
    this.running.add(actor);
    this.trails.set(actor, []);
    if (onCrash) this.crashHandlers.set(actor, onCrash);
    else this.crashHandlers.delete(actor);
    body().then(
      () => this.running.delete(actor),
      (err: unknown) => {
        this.running.delete(actor);
        this.faults.push(err);
      },
    );
  }

  /**
   * Declares `actor` detached: its flows start inside another actor's code (a callback that code
   * fires and does not await, such as a TypeORM subscriber event that starts broker round trips),
   * so they are never spawned; each reaches its first point from there. Once resumed, it is
   * given a few rounds to reach its next point or its end (it must await only promises).
   */
  detached(actor: string, onCrash?: () => void): void {
    this.detachedActors.add(actor);
    if (onCrash) this.crashHandlers.set(actor, onCrash);
  }

  /** Runs housekeeping (e.g. a restart) that settle() must wait for, outside any actor. */
  track(work: Promise<unknown>): void {
    this.background++;
    work.then(
      () => this.background--,
      (err: unknown) => {
        this.background--;
        this.faults.push(err);
      },
    );
  }

  addSource(source: () => EnvironmentMove[]): void {
    this.sources.push(source);
  }

  /**
   * Drops `actor`'s parked continuation without running its crash handler (another actor of the
   * same process crashed: the whole process is gone). Returns whether it was parked.
   */
  drop(actor: string): boolean {
    if (!this.parked.delete(actor)) return false;
    this.trails.get(actor)?.push('crashed');
    return true;
  }

  isBusy(actor: string): boolean {
    return this.running.has(actor) || this.parked.has(actor);
  }

  /** What `actor` did since it was spawned: its local state, since every choice name fixes its result. */
  trail(actor: string): readonly string[] {
    return this.trails.get(actor) ?? [];
  }

  /** Ids of every enabled move, in a stable order. */
  moves(): string[] {
    return this.enabled().map((m) => m.id);
  }

  /** Takes one move, then lets every resumed actor run to its next point or to its end. */
  async step(id: string): Promise<void> {
    const move = this.enabled().find((m) => m.id === id);
    if (!move)
      throw new Error(`replay diverged: "${id}" is not enabled; enabled: ${this.moves().join(' | ')}`);
    move.run();
    await this.settle();
  }

  async settle(): Promise<void> {
    const detachedRounds = this.resumedDetached.size > 0 ? DETACHED_SETTLE_ROUNDS : 0;
    for (let round = 0; this.running.size > 0 || this.background > 0 || round < detachedRounds; round++) {
      if (round === MAX_SETTLE_ROUNDS) {
        throw new Error(
          `${[...this.running].join(', ')} reached no point: awaiting something the scheduler does not drive?`,
        );
      }
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    // A resumed detached actor that reached no point has ended.
    this.resumedDetached.clear();
    if (this.faults.length > 0) throw this.faults[0];
  }

  private enabled(): Move[] {
    const out: Move[] = [];
    for (const actor of [...this.parked.keys()].sort()) {
      const parked = this.parked.get(actor)!;
      for (const choice of parked.choices()) {
        out.push({
          id: `${actor}: ${parked.label} -> ${choice.name}`,
          run: () => this.resume(actor, parked, choice),
        });
      }
      const onCrash = this.crashHandlers.get(actor);
      if (onCrash) {
        out.push({
          id: `${actor}: crashes at ${parked.label}`,
          run: () => {
            // The continuation is dropped: it never resumes, its finally blocks never run.
            this.parked.delete(actor);
            this.trails.get(actor)?.push('crashed');
            onCrash();
          },
        });
      }
    }
    for (const source of this.sources) out.push(...source());
    return out;
  }

  private resume(actor: string, parked: Parked, choice: Choice<unknown>): void {
    this.parked.delete(actor);
    if (this.detachedActors.has(actor)) this.resumedDetached.add(actor);
    else this.running.add(actor);
    this.trails.get(actor)?.push(`${parked.label} -> ${choice.name}`);
    let value: unknown;
    try {
      value = choice.apply();
    } catch (err) {
      parked.reject(err);
      return;
    }
    parked.resolve(value);
  }
}

// ---------------------------------------------------------------------------------------------
// The world: one tx_record row (InnoDB-like), the broker's half message, what reached the broker.

export type RowValue = 'NONE' | TxStatus;
export type BrokerState = 'NONE' | 'HALF' | 'DELIVERED' | 'DISCARDED';
export type Reply = 'COMMIT' | 'ROLLBACK';

export class World {
  /** The committed value of tx_record for the one txId. */
  committed: RowValue = 'NONE';
  /** The actor whose open transaction holds the row's lock, with the value it would commit. */
  holder: string | undefined;
  pending: TxStatus | undefined;
  /** The user's business write: in the producer's (actor 'P') open transaction, then committed or gone. */
  businessPending = false;
  businessCommitted = false;
  broker: BrokerState = 'NONE';
  /** The half message the broker holds (its properties carry TX_ID and TX_ORIGIN). */
  half: OutgoingMessage | undefined;
  readonly sent = new Set<Reply>();
  /** Check-backs the broker has started (its budget is bounded by the test). */
  checks = 0;
  /** Actors whose connection went back to the pool with its transaction open (and its locks held). */
  readonly leaks = new Set<string>();
  /** Protocol misuse the fakes saw (reported as violations by the test). */
  readonly faults: string[] = [];

  blocksInsertBy(actor: string): boolean {
    return this.holder !== undefined && this.holder !== actor;
  }

  lock(actor: string, value: TxStatus): void {
    if (this.committed !== 'NONE' || this.holder !== undefined)
      throw new Error(`${actor} locked a taken row`);
    this.holder = actor;
    this.pending = value;
  }

  /** Ends `actor`'s open transaction, if any: COMMIT makes its writes durable, else they vanish. */
  end(actor: string, commit: boolean): void {
    if (this.holder === actor) {
      if (commit) this.committed = this.pending!;
      this.holder = undefined;
      this.pending = undefined;
    }
    if (actor === 'P') {
      if (commit && this.businessPending) this.businessCommitted = true;
      this.businessPending = false;
    }
  }

  /** A resolution reaches the broker; the first one decides the half message. */
  deliver(reply: Reply): void {
    this.sent.add(reply);
    if (this.broker === 'HALF') this.broker = reply === 'COMMIT' ? 'DELIVERED' : 'DISCARDED';
  }

  key(): string {
    const lock = this.holder ? `(${this.holder} holds ${this.pending})` : '';
    const business = this.businessCommitted ? 'committed' : this.businessPending ? 'pending' : 'none';
    const leaks = [...this.leaks].sort().join('+');
    return `row=${this.committed}${lock} business=${business} broker=${this.broker} sent=${[...this.sent].sort().join('+')} checks=${this.checks} leaks=${leaks}`;
  }
}

/** What becomes of a pooled connection left with an open transaction: its next borrower, or its end. */
export function pooledConnectionMoves(world: World): EnvironmentMove[] {
  return [...world.leaks].flatMap((actor) => {
    const end = (commit: boolean) => () => {
      world.leaks.delete(actor);
      world.end(actor, commit);
    };
    return [
      // MySQL: START TRANSACTION (TypeORM's startTransaction) implicitly commits the open one.
      {
        id: `pool: the next borrower's START TRANSACTION commits ${actor}'s open transaction`,
        run: end(true),
      },
      { id: `pool: ${actor}'s pooled connection is closed (InnoDB rolls back)`, run: end(false) },
    ];
  });
}

/** A check-back for the half message the broker holds, built like RocketMqGateway's toCheckBackMessage. */
export function checkBackMessage(world: World): CheckBackMessage {
  const half = world.half;
  if (!half) throw new Error('the broker holds no half message');
  const properties = { ...half.properties };
  const txId = properties[TX_ID_PROPERTY];
  const origin = properties[TX_ORIGIN_PROPERTY];
  return {
    messageId: 'm0',
    topic: half.topic,
    keys: [...half.keys],
    properties,
    body: half.body,
    ...(txId !== undefined ? { txId } : {}),
    ...(origin !== undefined ? { origin } : {}),
  };
}

/** An error shaped like a mysql2 driver error, so nothing can mistake it for a user error. */
export function dbError(code: string, errno: number): Error {
  return Object.assign(new Error(`${code} (simulated)`), { code, errno });
}

function throws(error: Error): never {
  throw error;
}

// ---------------------------------------------------------------------------------------------
// The broker, seen from one producer instance.

export class ScheduledGateway implements BrokerGateway {
  private config: GatewayConfig | undefined;

  constructor(
    private readonly world: World,
    private readonly sched: Scheduler,
    private readonly actor: string,
  ) {}

  /** For TransactionalProducer's `internals.gateway`. */
  readonly factory = (config: GatewayConfig): BrokerGateway => {
    this.config = config;
    return this;
  };

  async start(): Promise<void> {}

  sendHalf(message: OutgoingMessage): Promise<HalfMessage> {
    const accept = (): HalfMessage => {
      this.world.broker = 'HALF';
      this.world.half = message;
      return { messageId: 'm0', topic: message.topic };
    };
    return this.sched.point(this.actor, 'send half', () => [
      { name: 'accepted', apply: accept },
      { name: 'rejected', apply: () => throws(new Error('proxy refused the half message (simulated)')) },
      {
        name: 'accepted, ack lost',
        apply: () => {
          accept();
          throw new Error('DEADLINE_EXCEEDED after the proxy stored the half message (simulated)');
        },
      },
    ]);
  }

  endTransaction(_half: HalfMessage, commit: boolean): Promise<void> {
    const reply: Reply = commit ? 'COMMIT' : 'ROLLBACK';
    return this.sched.point(this.actor, `EndTransaction ${reply}`, () => [
      { name: 'delivered', apply: () => this.world.deliver(reply) },
      { name: 'lost', apply: () => throws(new Error('EndTransaction lost (simulated)')) },
    ]);
  }

  async send(): Promise<{ messageId: string }> {
    throw new Error('normal sends are not part of this world');
  }

  async shutdown(): Promise<void> {}

  /** The broker asks this instance, as RocketMqGateway's checker does: UNKNOWN or a throw sends no reply. */
  async checkBack(message: CheckBackMessage): Promise<void> {
    const handler = this.config?.onCheckBack;
    if (!handler) throw new Error(`${this.actor} declared no check-back handler`);
    const answer: TransactionResolution = await handler(message).catch(() => 'UNKNOWN' as const);
    if (answer === 'UNKNOWN') return;
    const reply: Reply = answer;
    await this.sched.point(this.actor, `reply ${reply}`, () => [
      { name: 'delivered', apply: () => this.world.deliver(reply) },
      { name: 'lost', apply: () => undefined },
    ]);
  }
}

// ---------------------------------------------------------------------------------------------
// tx_record: the primitives only (the producer's INSERT inside its transaction, the check-back's
// read and tombstone INSERT). The decision over them is the production src/checkback/fence.ts.

type Undecided = Extract<TombstoneOutcome, { kind: 'UNDECIDED' }>;

const undecided = (
  reason: 'LOCK_WAIT_TIMEOUT' | 'DEADLOCK' | 'DATABASE_ERROR',
  code: string,
  errno: number,
): Undecided => ({ kind: 'UNDECIDED', reason, error: dbError(code, errno) });

export class ScheduledTxRecordStore implements TxRecordStore {
  /**
   * Set after a tombstone attempt that found the row: the next read is named "fresh read", so the
   * exploration's coverage can say that path was taken. The fence calls the same readStatus.
   */
  private afterDuplicate = false;

  constructor(
    private readonly world: World,
    private readonly sched: Scheduler,
    private readonly actor: string,
  ) {}

  /** Waits while another transaction holds the row; a committed row is a duplicate key. */
  insertCommitted(_manager: EntityManager, record: NewTxRecord): Promise<boolean> {
    this.expectHalfOf(record);
    const w = this.world;
    return this.sched.point(this.actor, 'INSERT tx_record', () => {
      if (w.blocksInsertBy(this.actor)) {
        return [{ name: 'lock-wait timeout', apply: () => throws(dbError('ER_LOCK_WAIT_TIMEOUT', 1205)) }];
      }
      const connectionError = { name: 'connection error', apply: () => throws(dbError('ECONNRESET', 0)) };
      if (w.committed !== 'NONE') return [{ name: 'duplicate key', apply: () => false }, connectionError];
      const insert = (): boolean => {
        w.lock(this.actor, 'COMMITTED');
        return true;
      };
      return [{ name: 'inserted', apply: insert }, connectionError];
    });
  }

  /** The autocommit tombstone INSERT: blocks on an open transaction's row, then commits on its own. */
  async insertTombstone(record: NewTxRecord, _lockWaitTimeoutMs?: number): Promise<TombstoneOutcome> {
    this.expectHalfOf(record);
    const w = this.world;
    const inserted = await this.sched.point<TombstoneOutcome | 'LOCKED'>(this.actor, 'fence INSERT', () => {
      if (w.blocksInsertBy(this.actor)) {
        return [
          {
            name: 'lock-wait timeout',
            apply: () => undecided('LOCK_WAIT_TIMEOUT', 'ER_LOCK_WAIT_TIMEOUT', 1205),
          },
          { name: 'deadlock victim', apply: () => undecided('DEADLOCK', 'ER_LOCK_DEADLOCK', 1213) },
        ];
      }
      const connectionError = {
        name: 'connection error',
        apply: () => undecided('DATABASE_ERROR', 'ECONNRESET', 0),
      };
      if (w.committed !== 'NONE') {
        const duplicate = (): TombstoneOutcome => {
          this.afterDuplicate = true;
          return { kind: 'EXISTS' };
        };
        return [{ name: 'duplicate key', apply: duplicate }, connectionError];
      }
      const insert = (): 'LOCKED' => {
        w.lock(this.actor, 'ROLLED_BACK');
        return 'LOCKED';
      };
      return [{ name: 'row locked', apply: insert }, connectionError];
    });
    if (inserted !== 'LOCKED') return inserted;
    const end = (commit: boolean, outcome: TombstoneOutcome) => (): TombstoneOutcome => {
      w.end(this.actor, commit);
      return outcome;
    };
    const failed = undecided('DATABASE_ERROR', 'ECONNRESET', 0);
    return this.sched.point<TombstoneOutcome>(this.actor, 'fence autocommit', () => [
      { name: 'committed', apply: end(true, { kind: 'INSERTED' }) },
      { name: 'failed, rolled back', apply: end(false, failed) },
      { name: 'failed, did commit', apply: end(true, failed) },
    ]);
  }

  /**
   * A plain consistent read (a new statement): never waits, never sees an open transaction's row,
   * sees every committed one ("fresh read" when it follows a duplicate key).
   */
  readStatus(_txId?: string): Promise<TxStatus | undefined> {
    const w = this.world;
    const label = this.afterDuplicate ? 'fresh read' : 'plain read';
    this.afterDuplicate = false;
    return this.sched.point<TxStatus | undefined>(this.actor, label, () => [
      { name: `row read: ${w.committed}`, apply: () => (w.committed === 'NONE' ? undefined : w.committed) },
      { name: 'read error', apply: () => throws(dbError('ECONNRESET', 0)) },
    ]);
  }

  async markConfirmed(): Promise<void> {}

  /** The one row is the half message's: same TX_ID, and the producerGroup in its TX_ORIGIN. */
  private expectHalfOf(record: NewTxRecord): void {
    const properties = this.world.half?.properties;
    if (!properties) return;
    const { [TX_ID_PROPERTY]: txId, [TX_ORIGIN_PROPERTY]: origin } = properties;
    if (record.txId !== txId || record.producerGroup !== origin) {
      this.world.faults.push(
        `${this.actor} wrote tx_record ${record.txId}/${record.producerGroup}, the half is ${txId}/${origin}`,
      );
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The producer's connection: a TypeORM-like QueryRunner whose COMMIT and ROLLBACK are points.

export interface ScheduledDbOptions {
  /**
   * Adds COMMIT / ROLLBACK failures on a live connection before the statement is sent, as when a
   * TypeORM beforeTransactionCommit / beforeTransactionRollback subscriber throws: the transaction stays open.
   */
  commitFailsBeforeSending?: boolean;
  rollbackFailsBeforeSending?: boolean;
}

export function scheduledDataSource(
  world: World,
  sched: Scheduler,
  actor: string,
  options: ScheduledDbOptions = {},
): DataSource {
  const createQueryRunner = () => {
    // TypeORM's MysqlQueryRunner turns isTransactionActive false only once its COMMIT/ROLLBACK succeeded;
    // `open` is the server's view, `alive` the connection's.
    let active = false;
    let open = false;
    let alive = true;
    const ended = (commit: boolean): void => {
      world.end(actor, commit);
      active = false;
      open = false;
    };
    const connectionLost = (commit: boolean) => (): never => {
      world.end(actor, commit);
      open = false;
      alive = false;
      throw dbError('ECONNRESET', 0);
    };
    const unusable = () =>
      alive
        ? undefined
        : Promise.reject(new Error("Can't add new command when connection is in closed state"));
    const failsBeforeSending = (enabled: boolean | undefined, hook: 'Commit' | 'Rollback') =>
      enabled
        ? [
            {
              name: `failed before ${hook === 'Commit' ? 'COMMIT' : 'ROLLBACK'} was sent`,
              apply: () => throws(new Error(`beforeTransaction${hook} subscriber failed (simulated)`)),
            },
          ]
        : [];
    return {
      manager: { marker: actor } as unknown as EntityManager,
      get isTransactionActive() {
        return active;
      },
      async connect() {},
      async startTransaction() {
        active = true;
        open = true;
      },
      commitTransaction(): Promise<void> {
        const dead = unusable();
        if (dead) return dead;
        if (!active) return Promise.reject(new Error('TransactionNotStartedError (simulated)'));
        return sched.point(actor, 'COMMIT', () => [
          { name: 'ok', apply: () => ended(true) },
          { name: 'ambiguous, did commit', apply: connectionLost(true) },
          { name: 'ambiguous, did not commit', apply: connectionLost(false) },
          ...failsBeforeSending(options.commitFailsBeforeSending, 'Commit'),
        ]);
      },
      rollbackTransaction(): Promise<void> {
        const dead = unusable();
        if (dead) return dead;
        if (!active) return Promise.reject(new Error('TransactionNotStartedError (simulated)'));
        return sched.point(actor, 'ROLLBACK', () => [
          { name: 'ok', apply: () => ended(false) },
          { name: 'connection lost (InnoDB rolls back)', apply: connectionLost(false) },
          ...failsBeforeSending(options.rollbackFailsBeforeSending, 'Rollback'),
        ]);
      },
      /** Raw statements bypass TypeORM's subscribers and leave isTransactionActive as it is. */
      query(sql: string): Promise<unknown> {
        const dead = unusable();
        if (dead) return dead;
        if (sql.trim().toUpperCase() !== 'ROLLBACK') {
          return Promise.reject(new Error(`this fake connection runs only a raw ROLLBACK, not ${sql}`));
        }
        const rolledBack = () => {
          world.end(actor, false);
          open = false;
          return [];
        };
        return sched.point(actor, 'raw ROLLBACK', () => [
          { name: 'ok', apply: rolledBack },
          { name: 'connection lost (InnoDB rolls back)', apply: connectionLost(false) },
        ]);
      },
      async release() {
        // TypeORM + mysql2 (resetOnRelease is off by default) pool a live connection as it is:
        // an open transaction keeps its locks, and the next borrower's START TRANSACTION commits it.
        if (alive && open) world.leaks.add(actor);
      },
    };
  };
  return { isInitialized: true, options: { type: 'mysql' }, createQueryRunner } as unknown as DataSource;
}

// ---------------------------------------------------------------------------------------------
// Exhaustive exploration by replay.

export interface ExplorableRun {
  readonly sched: Scheduler;
  /** The abstract state: world, each actor's local state, counters. Equal keys must have equal futures. */
  key(): string;
  /** Invariants broken in the current state. */
  violations(): string[];
}

export interface Exploration {
  states: number;
  terminals: number;
  transitions: number;
  /** Every distinct move taken, for coverage assertions. */
  movesTaken: Set<string>;
  /** The first violation found (BFS: a shortest trace). */
  violation?: { problems: string[]; trace: string[] };
}

export interface ExploreOptions<R> {
  /** Stops with an error past this many states (a guard against a broken key). */
  maxStates?: number;
  /** Awaited before the exploration goes on (it may drive the terminal run further). */
  onTerminal?: (run: R, trace: readonly string[]) => void | Promise<void>;
}

/**
 * Breadth-first over move sequences, re-running the real code from scratch for every prefix.
 * Two checks keep the pruning honest: a replayed prefix must reach the state it reached before
 * (the code under test is deterministic given the moves), and two runs with the same key must
 * offer the same moves (the key is not coarser than the actors' real local state).
 */
export async function explore<R extends ExplorableRun>(
  start: () => Promise<R>,
  options: ExploreOptions<R> = {},
): Promise<Exploration> {
  const maxStates = options.maxStates ?? 100_000;
  const replay = async (prefix: readonly string[]): Promise<R> => {
    const run = await start();
    await run.sched.settle();
    for (const id of prefix) await run.sched.step(id);
    return run;
  };
  /** Each state's enabled moves, by key. */
  const seen = new Map<string, string>();
  const visit = (run: R, trace: readonly string[]): { key: string; fresh: boolean } => {
    const key = run.key();
    const moves = run.sched.moves().join(' | ');
    const known = seen.get(key);
    if (known === undefined) seen.set(key, moves);
    else if (known !== moves) {
      throw new Error(
        `state key too coarse: ${key}\n  offers ${moves}\n  and ${known}\n  after ${trace.join(' -> ')}`,
      );
    }
    return { key, fresh: known === undefined };
  };
  const root = await replay([]);
  const result: Exploration = { states: 1, terminals: 0, transitions: 0, movesTaken: new Set() };
  const rootProblems = root.violations();
  if (rootProblems.length > 0) return { ...result, violation: { problems: rootProblems, trace: [] } };
  const queue: Array<{ prefix: string[]; key: string; live?: R }> = [
    { prefix: [], key: visit(root, []).key, live: root },
  ];
  while (queue.length > 0) {
    const { prefix, key, live } = queue.shift()!;
    const here = live ?? (await replay(prefix));
    if (here.key() !== key) throw new Error(`replay is not deterministic: ${prefix.join(' -> ')}`);
    const moves = here.sched.moves();
    if (moves.length === 0) {
      result.terminals++;
      await options.onTerminal?.(here, prefix);
      continue;
    }
    for (const [i, id] of moves.entries()) {
      const run = i === 0 ? here : await replay(prefix);
      await run.sched.step(id);
      result.transitions++;
      result.movesTaken.add(id);
      const trace = [...prefix, id];
      const child = visit(run, trace);
      if (!child.fresh) continue;
      result.states++;
      if (result.states > maxStates)
        throw new Error(`more than ${maxStates} states: is the state key too fine?`);
      const problems = run.violations();
      if (problems.length > 0) return { ...result, violation: { problems, trace } };
      // The last child's run is not reused by a sibling: keep it live so expanding it needs no replay.
      queue.push({ prefix: trace, key: child.key, ...(i === moves.length - 1 ? { live: run } : {}) });
    }
  }
  return result;
}

/** The model's failure style: the broken invariants, then the moves that lead there. */
export function formatViolation(variant: string, violation: { problems: string[]; trace: string[] }): string {
  return [
    `variant=${variant} VIOLATION: ${violation.problems.join('; ')}`,
    `  trace: ${violation.trace.join(' -> ')}`,
  ].join('\n');
}
