/**
 * The join mode (`producer.publish(manager, events)`) explored like fence-exploration.test.ts
 * explores `transact`: the caller opens its own transaction with TypeORM's
 * EntityManager.transaction on a real MysqlQueryRunner (savepoints, transactionDepth and the
 * subscriber events are TypeORM's code; only its statements are scheduled), calls the REAL
 * publish, then commits, or its work throws and TypeORM rolls back. The producer's subscriber
 * (src/producer/joinedTransactions.ts) is told the end by TypeORM's events, and the fresh read and
 * EndTransaction it starts run as their own flow. Two check-back instances (real producers:
 * gateway handler -> CheckBackDispatcher -> src/checkback/fence.ts) answer the broker. Crashes of
 * the caller's process at every point — also after a durable COMMIT, before the after-commit
 * event runs — lost messages, ambiguous commits, lock waits. At every terminal state the broker
 * is asked once more without faults: a committed caller transaction must end delivered.
 */
import type { EntityManager } from 'typeorm';
import { TransactionalProducer, type PublishOutcome } from '../../src';
import { JoinedTransactions } from '../../src/producer/joinedTransactions';
import { TX_ID_PROPERTY } from '../../src/checkback/resolution';
import type { TxRecordStore } from '../../src/store/ports';
import {
  AFTER_END,
  CALLER,
  JoinGateway,
  JoinWorld,
  callerDataSource,
  currentFlow,
  flowStore,
  type CallerDbOptions,
} from './fakes/join';
import {
  Scheduler,
  ScheduledTxRecordStore,
  checkBackMessage,
  explore,
  formatViolation,
  pooledConnectionMoves,
  scheduledDataSource,
  type ExplorableRun,
} from './fakes/scheduler';

const PRODUCER_GROUP = 'orders';
const TOPIC = 'orders_tx';
const CHECKERS = ['C1', 'C2'] as const;

class WorkFailedError extends Error {
  override name = 'WorkFailedError';
}
class SavepointWorkFailedError extends Error {
  override name = 'SavepointWorkFailedError';
}

interface Caller {
  readonly manager: EntityManager;
  /** The real producer.publish(manager, one event). */
  publish(manager: EntityManager): Promise<void>;
  /** The caller's own write: succeeds, or throws (the transaction rolls back). */
  work(): Promise<void>;
}

/** What the caller does inside `manager.transaction(...)`. */
interface Scenario {
  readonly name: string;
  readonly body: (caller: Caller) => Promise<void>;
  /** The fence row may be rolled back to a savepoint while the caller's work commits. */
  readonly fenceUndone?: boolean;
  readonly db?: CallerDbOptions;
  /** The broker's check budget per half message. */
  readonly maxChecks: number;
  /** Check-back instances may crash (off where the other scenarios already cover it, to bound the run). */
  readonly checkerCrashes: boolean;
  /** A half message the proxy stored although its send failed (off where the others cover it). */
  readonly halfAckLost: boolean;
}

const oneCall: Scenario = {
  name: 'one publish, then work; COMMIT may report ok for a rolled-back transaction',
  body: async ({ manager, publish, work }) => {
    await publish(manager);
    await work();
  },
  db: { commitCanRollBack: true },
  maxChecks: 1,
  checkerCrashes: true,
  halfAckLost: true,
};

const eventsLost: Scenario = {
  ...oneCall,
  name: 'one publish, TypeORM events never reach the producer (no after-commit callback, no crash)',
  db: { eventsLost: true },
};

const twoCalls: Scenario = {
  name: 'two publish calls in one transaction (one fence row, two half messages)',
  body: async ({ manager, publish, work }) => {
    await publish(manager);
    await publish(manager);
    await work();
  },
  maxChecks: 1,
  checkerCrashes: false,
  halfAckLost: false,
};

const savepointReleased: Scenario = {
  name: 'publish inside a savepoint that is released, then work',
  body: async ({ manager, publish, work }) => {
    await manager.transaction((inner) => publish(inner));
    await work();
  },
  maxChecks: 1,
  checkerCrashes: true,
  halfAckLost: true,
};

const savepointRolledBack: Scenario = {
  name: 'publish inside a savepoint rolled back, then work commits',
  body: async ({ manager, publish, work }) => {
    try {
      await manager.transaction(async (inner) => {
        await publish(inner);
        throw new SavepointWorkFailedError('the nested work failed');
      });
    } catch (err) {
      if (!(err instanceof SavepointWorkFailedError)) throw err;
    }
    await work();
  },
  fenceUndone: true,
  maxChecks: 1,
  checkerCrashes: true,
  halfAckLost: true,
};

interface JoinRun extends ExplorableRun {
  readonly world: JoinWorld;
  /** 'running', 'crashed', 'committed' (transaction() resolved) or the name of the error it threw. */
  readonly outcome: () => string;
  readonly publishOutcomes: () => PublishOutcome[];
}

interface RunOptions {
  /** Replaces the tx_record primitives of the caller's process (a broken producer). */
  producerStore?: (store: TxRecordStore) => TxRecordStore;
}

async function startRun(scenario: Scenario, options: RunOptions = {}): Promise<JoinRun> {
  const world = new JoinWorld();
  const sched = new Scheduler();
  const { dataSource, connection } = callerDataSource(world, sched, scenario.db);

  const processStore = flowStore({
    [CALLER]: new ScheduledTxRecordStore(world, sched, CALLER),
    [AFTER_END]: new ScheduledTxRecordStore(world, sched, AFTER_END),
  });
  const gateway = new JoinGateway(world, sched, currentFlow, scenario.halfAckLost);
  const producer = new TransactionalProducer(
    { endpoints: '127.0.0.1:8081', dataSource, producerGroup: PRODUCER_GROUP, topics: [TOPIC] },
    {
      gateway: gateway.factory,
      store: options.producerStore ? options.producerStore(processStore) : processStore,
    },
  );
  await producer.start();

  let outcome = 'running';
  const publishOutcomes: PublishOutcome[] = [];
  const crash = () => {
    // The process dies with its pool: InnoDB rolls back every open transaction it had.
    world.end(CALLER, false);
    world.callerOpen = false;
    world.leaks.delete(CALLER);
    sched.drop(CALLER);
    sched.drop(AFTER_END);
    outcome = 'crashed';
  };
  const caller: Caller = {
    manager: (dataSource as unknown as { manager: EntityManager }).manager,
    publish: async (manager) => {
      const result = await producer.publish(manager, { topic: TOPIC, body: { orderId: 1 } });
      const halfTxId = world.half?.properties[TX_ID_PROPERTY];
      if (result.txId !== halfTxId)
        world.faults.push(`publish returned ${result.txId}, the half is ${halfTxId}`);
      void result.outcome.then((o) => publishOutcomes.push(o));
    },
    work: () =>
      sched.point<void>(CALLER, 'work', () => [
        {
          name: 'ok',
          apply: () => {
            world.businessPending = true;
          },
        },
        {
          name: 'fails',
          apply: () => {
            throw new WorkFailedError('business rule violated');
          },
        },
      ]),
  };
  sched.spawn(
    CALLER,
    async () => {
      try {
        await caller.manager.transaction((manager) => scenario.body({ ...caller, manager }));
        outcome = 'committed';
      } catch (err) {
        outcome = err instanceof Error ? err.name : String(err);
      }
    },
    crash,
  );
  sched.detached(AFTER_END, crash);

  const checkers = new Map<string, JoinGateway>();
  const startChecker = async (actor: string) => {
    const checkerGateway = new JoinGateway(world, sched, () => actor);
    const checker = new TransactionalProducer(
      {
        endpoints: '127.0.0.1:8081',
        dataSource: scheduledDataSource(world, sched, actor),
        producerGroup: PRODUCER_GROUP,
        topics: [TOPIC],
      },
      { gateway: checkerGateway.factory, store: new ScheduledTxRecordStore(world, sched, actor) },
    );
    checkers.set(actor, checkerGateway);
    await checker.start();
  };
  for (const actor of CHECKERS) await startChecker(actor);
  // The broker asks any idle instance about an unresolved half, within its check budget.
  sched.addSource(() =>
    world.halves.flatMap((half) => {
      if (half.state !== 'HALF') return [];
      const checks = world.checksOf(half.id);
      if (checks >= scenario.maxChecks && world.extraChecks === 0) return [];
      return CHECKERS.filter((actor) => !sched.isBusy(actor)).map((actor) => ({
        id: `broker asks ${actor} about ${half.id}`,
        run: () => {
          if (checks >= scenario.maxChecks) world.extraChecks--;
          world.countCheck(half.id);
          world.half = half.message;
          const message = checkBackMessage(world);
          // The process dies: InnoDB rolls its open statement back; a fresh instance takes over.
          const crash = () => {
            world.end(actor, false);
            sched.track(startChecker(actor));
          };
          sched.spawn(
            actor,
            () => checkers.get(actor)!.checkBack(half.id, message),
            scenario.checkerCrashes ? crash : undefined,
          );
        },
      }));
    }),
  );
  sched.addSource(() => pooledConnectionMoves(world));

  const actorKey = (actor: string) => (sched.isBusy(actor) ? sched.trail(actor).join(', ') : 'idle');
  return {
    sched,
    world,
    outcome: () => outcome,
    publishOutcomes: () => publishOutcomes,
    key: () =>
      [
        world.key(),
        `P: ${outcome === 'running' ? actorKey(CALLER) : outcome} commitSent=${connection.commitSent}`,
        `Pe: ${actorKey(AFTER_END)}`,
        `outcomes=${publishOutcomes.join('+')}`,
        ...CHECKERS.map((actor) => `${actor}: ${actorKey(actor)}`),
      ].join(' | '),
    violations: () => violations(world, scenario, outcome, connection.commitSent, publishOutcomes),
  };
}

function violations(
  world: JoinWorld,
  scenario: Scenario,
  outcome: string,
  commitSent: boolean,
  publishOutcomes: readonly PublishOutcome[],
): string[] {
  const v = [...world.faults];
  const committed = world.committed === 'COMMITTED';
  if (world.leaks.size > 0) v.push('a connection went back to the pool with its transaction open');
  for (const h of world.halves) {
    if (h.sent.has('COMMIT') && h.sent.has('ROLLBACK')) v.push(`${h.id}: both COMMIT and ROLLBACK sent`);
    if (h.state === 'DELIVERED' && !committed) v.push(`${h.id}: delivered but not committed (phantom)`);
    if (h.state === 'DISCARDED' && committed) v.push(`${h.id}: committed but rolled back (lost)`);
    if (h.state === 'DELIVERED' && h.undone)
      v.push(`${h.id}: delivered although rolled back to its savepoint`);
  }
  // The caller's transaction is all or nothing: its work commits with the fence row.
  if (!scenario.fenceUndone && world.businessCommitted !== committed && !world.holder)
    v.push(
      `the work ${world.businessCommitted ? 'committed' : 'did not commit'}, tx_record is ${world.committed}`,
    );
  // Rolled back (or never sent a COMMIT): never committed.
  const threw = !['running', 'crashed', 'committed'].includes(outcome);
  if (threw && !commitSent && (committed || world.businessCommitted))
    v.push(`the caller's transaction threw ${outcome} before its COMMIT, yet it committed`);
  if (
    publishOutcomes.includes('committed') &&
    !(committed && world.halves.every((h) => h.state === 'DELIVERED'))
  )
    v.push('publish outcome committed, but tx_record is not COMMITTED or a half is not delivered');
  if (publishOutcomes.includes('rolled_back') && !scenario.fenceUndone && committed)
    v.push('publish outcome rolled_back, but tx_record is COMMITTED');
  return v;
}

/**
 * At a terminal state (everything settled, the check budget spent) the broker asks once more
 * about every unresolved half and nothing fails (each point's first choice: accepted, inserted,
 * committed, delivered): the fence must then resolve every half by the row. A committed caller
 * transaction ends delivered, a rolled-back one rolled back.
 */
async function drain(run: JoinRun): Promise<string[]> {
  const { world, sched } = run;
  world.extraChecks = world.halves.filter((h) => h.state === 'HALF').length;
  for (let steps = 0; sched.moves().length > 0; steps++) {
    if (steps === 100) return ['the final check-backs did not end'];
    await sched.step(sched.moves()[0]!);
  }
  const problems = run.violations();
  const committed = world.committed === 'COMMITTED';
  for (const h of world.halves) {
    if (h.state === 'HALF') problems.push(`${h.id}: still unresolved after a check-back without faults`);
    else if (committed && h.state !== 'DELIVERED')
      problems.push(`${h.id}: the caller committed, not delivered`);
  }
  return problems;
}

interface Figures {
  states: number;
  terminals: number;
  transitions: number;
  ms: number;
  committedTerminals: number;
  workCommittedTerminals: number;
  /** Committed terminal states that needed the final check-back (no after-commit COMMIT reached the broker). */
  deliveredByDrain: number;
  outcomes: Set<string>;
  movesTaken: Set<string>;
}

async function exploreScenario(
  scenario: Scenario,
  options: RunOptions = {},
): Promise<{ figures: Figures; violation?: { problems: string[]; trace: string[] } }> {
  const started = Date.now();
  const outcomes = new Set<string>();
  let committedTerminals = 0;
  let workCommittedTerminals = 0;
  let deliveredByDrain = 0;
  let terminalViolation: { problems: string[]; trace: string[] } | undefined;
  const result = await explore(() => startRun(scenario, options), {
    maxStates: 60_000,
    onTerminal: async (run, trace) => {
      outcomes.add(run.outcome());
      const committed = run.world.committed === 'COMMITTED';
      if (committed) committedTerminals++;
      if (run.world.businessCommitted) workCommittedTerminals++;
      const undelivered = run.world.halves.some((h) => h.state === 'HALF');
      const problems = await drain(run);
      if (committed && undelivered && problems.length === 0) deliveredByDrain++;
      if (problems.length > 0 && !terminalViolation)
        terminalViolation = {
          problems,
          trace: [...trace, '(terminal: the broker asks once more, nothing fails)'],
        };
    },
  });
  const figures: Figures = {
    states: result.states,
    terminals: result.terminals,
    transitions: result.transitions,
    ms: Date.now() - started,
    committedTerminals,
    workCommittedTerminals,
    deliveredByDrain,
    outcomes,
    movesTaken: result.movesTaken,
  };
  const violation = result.violation ?? terminalViolation;
  return violation ? { figures, violation } : { figures };
}

const summary: string[] = [];
afterAll(() => console.log(summary.join('\n')));

const describeFigures = (name: string, f: Figures) =>
  `join ${name}: states=${f.states} terminals=${f.terminals} transitions=${f.transitions} (${f.ms} ms);` +
  ` committed terminals=${f.committedTerminals}, delivered only by the final check-back=${f.deliveredByDrain}`;

describe('publish (join mode), every interleaving of the caller, its after-end flow and two check-back instances', () => {
  it.each<[string, Scenario, string[], string[]]>([
    [
      'one call',
      oneCall,
      [
        'P: COMMIT -> reports ok, rolled back',
        'P: crashes at COMMIT returned',
        'P: work -> fails',
        'Pe: plain read -> row read: COMMITTED',
        'Pe: plain read -> row read: NONE',
        'Pe: EndTransaction ROLLBACK -> m0 delivered',
        'Pe: EndTransaction COMMIT -> m0 lost',
        'C1: reply COMMIT -> delivered',
      ],
      // Never TransactionFencedError: the fence row is inserted before the half message exists.
      ['WorkFailedError', 'committed', 'crashed', 'BrokerUnavailableError', 'StoreError'],
    ],
    [
      'no after-commit callback',
      eventsLost,
      ['C1: reply COMMIT -> delivered', 'C2: reply ROLLBACK -> delivered', 'P: work -> fails'],
      ['WorkFailedError', 'committed', 'crashed'],
    ],
    ['two calls', twoCalls, ['Pe: EndTransaction COMMIT -> m0 delivered, m1 lost'], ['committed', 'crashed']],
    ['savepoint released', savepointReleased, ['P: work -> fails'], ['committed', 'WorkFailedError']],
    [
      'savepoint rolled back',
      savepointRolledBack,
      ['Pe: EndTransaction ROLLBACK -> m0 delivered', 'P: work -> ok'],
      ['committed', 'crashed'],
    ],
  ])(
    '%s: a rolled-back caller transaction is never delivered, a committed one always is',
    async (name, scenario, expectedMoves, expectedOutcomes) => {
      const { figures, violation } = await exploreScenario(scenario);
      summary.push(describeFigures(name, figures));
      if (violation) throw new Error(formatViolation(name, violation));
      expect(expectedMoves.filter((id) => !figures.movesTaken.has(id))).toEqual([]);
      expect(expectedOutcomes.filter((o) => !figures.outcomes.has(o))).toEqual([]);
      // The after-end flow runs exactly when TypeORM's events reach the producer.
      expect([...figures.movesTaken].some((id) => id.startsWith(`${AFTER_END}:`))).toBe(
        !scenario.db?.eventsLost,
      );
      // Not vacuous: the caller's work commits in some terminal states (with the fence row, or
      // without it when the savepoint holding it was rolled back).
      expect(figures.workCommittedTerminals).toBeGreaterThan(0);
      if (!scenario.fenceUndone) expect(figures.committedTerminals).toBeGreaterThan(0);
    },
    120_000,
  );
});

describe('mutations of the publish path are caught', () => {
  afterEach(() => jest.restoreAllMocks());

  it('COMMIT without the fresh tx_record read after the caller commits', async () => {
    // The producer's read after commit answers COMMITTED without reading (the check-back's reads are real).
    const noFreshRead = (store: TxRecordStore): TxRecordStore => ({
      ...store,
      insertCommitted: (m, r) => store.insertCommitted(m, r),
      readStatus: () => Promise.resolve('COMMITTED'),
    });
    const { figures, violation } = await exploreScenario(oneCall, { producerStore: noFreshRead });
    summary.push(`${describeFigures('mutation no-fresh-read', figures)}`);
    expect(violation).toBeDefined();
    summary.push(formatViolation('no-fresh-read', violation!));
    expect(violation!.problems.join('; ')).toMatch(/delivered but not committed/);
  }, 120_000);

  it('ending the broker transaction when a savepoint is released', async () => {
    // The production handler, told every release is the outermost end.
    const original = JoinedTransactions.prototype.afterTransactionCommit;
    jest.spyOn(JoinedTransactions.prototype, 'afterTransactionCommit').mockImplementation(function (
      this: JoinedTransactions,
      event,
    ) {
      const runner = event.queryRunner as { isTransactionActive: boolean };
      const active = runner.isTransactionActive;
      runner.isTransactionActive = false;
      try {
        original.call(this, event);
      } finally {
        runner.isTransactionActive = active;
      }
    });
    const { figures, violation } = await exploreScenario(savepointReleased);
    summary.push(`${describeFigures('mutation end-on-release', figures)}`);
    expect(violation).toBeDefined();
    summary.push(formatViolation('end-on-release', violation!));
    expect(violation!.problems.join('; ')).toMatch(/committed but rolled back|not delivered/);
  }, 120_000);
});
