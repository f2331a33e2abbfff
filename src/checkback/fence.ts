/**
 * The check-back fence, whole (DESIGN.md "Check-back: a fence, never a guess"): who may decide a
 * half message (ownership guards), how the answer is decided over the tx_record primitives
 * (read first, tombstone attempt, classification, fresh read, answer) and what a COMMIT answer
 * confirms. The store gives primitives only (TxRecordStore: readStatus, insertTombstone); every
 * decision is here, once. test/unit/fence-exploration.test.ts explores this file's code over
 * faked primitives, every interleaving.
 */
import type {
  NewTxRecord,
  TombstoneOutcome,
  TombstonesOutcome,
  TxRecordState,
  TxRecordStore,
  TxStatus,
  TxStatusReader,
} from '../store/ports';
import { toStoreError } from '../store/typeorm/storeError';
import { errorFields, noopLogger, type Logger } from '../util/logger';
import { isUuid } from '../util/uuidv7';
import { optionalInt } from '../util/validate';
import {
  EVENT_ID_PROPERTY,
  TransactionResolution,
  type CheckBackMessage,
  type CheckBackResolver,
} from './resolution';

/**
 * How a check-back's answer was decided:
 * - `row_found`: the fence found the transaction's tx_record row (COMMIT or ROLLBACK as it says);
 * - `fenced`: the fence inserted the ROLLED_BACK tombstone (ROLLBACK; the producer was too late);
 * - `lock_timeout` / `deadlock`: the fence could not decide yet (UNKNOWN; the broker asks again);
 * - `error`: a database error, or a resolver that threw or returned no resolution (UNKNOWN);
 * - `no_row`: a read-only answer (the relay) found no row: UNKNOWN, a producer decides;
 * - `shed`: the check-back queue was full (UNKNOWN);
 * - `foreign_origin`: another producerGroup's transaction (UNKNOWN, wrong-service guard);
 * - `malformed`: a TX_ID or EVENT_ID rocketmq-tx did not write (UNKNOWN, no write);
 * - `no_tx_id`: a message without TX_ID and no custom resolver (UNKNOWN);
 * - `custom_resolver`: the user's CheckBackResolver answered.
 */
export type CheckBackDecision =
  | 'row_found'
  | 'fenced'
  | 'lock_timeout'
  | 'deadlock'
  | 'error'
  | 'no_row'
  | 'shed'
  | 'foreign_origin'
  | 'malformed'
  | 'no_tx_id'
  | 'custom_resolver';

/** A resolution and how it was decided. */
export interface DecidedResolution {
  readonly resolution: TransactionResolution;
  readonly decidedBy: CheckBackDecision;
}

// ---- ownership guards --------------------------------------------------------------------------

/** Whether a check-back is ours to decide, and if not, why it is answered UNKNOWN without a write. */
export type Ownership =
  | { readonly owned: true; readonly txId: string; readonly eventId?: string }
  | { readonly owned: false; readonly decidedBy: 'no_tx_id' | 'foreign_origin' | 'malformed' };

/**
 * The ownership guards, the only copy: a TX_ID (a UUID: a forged or malformed one is never ours),
 * an EVENT_ID that is a UUID when present (our half messages carry one), and, unless
 * `producerGroup` is undefined (read-only answers, which never write), TX_ORIGIN = our
 * producerGroup (wrong-service guard: another service's half message; only its owner may decide it).
 */
export function ownership(message: CheckBackMessage, producerGroup: string | undefined): Ownership {
  const { txId, origin } = message;
  if (txId === undefined) return { owned: false, decidedBy: 'no_tx_id' };
  if (producerGroup !== undefined && origin !== producerGroup)
    return { owned: false, decidedBy: 'foreign_origin' };
  if (!isUuid(txId)) return { owned: false, decidedBy: 'malformed' };
  const eventId = message.properties[EVENT_ID_PROPERTY];
  if (eventId !== undefined && !isUuid(eventId)) return { owned: false, decidedBy: 'malformed' };
  return { owned: true, txId, ...(eventId !== undefined ? { eventId } : {}) };
}

// ---- the decision ------------------------------------------------------------------------------

/** What the fence decided, with the database error behind an UNKNOWN. */
type FenceAnswer = DecidedResolution & { readonly error?: unknown };

const answerRow = (status: TxStatus): FenceAnswer => ({
  resolution: status === 'COMMITTED' ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK,
  decidedBy: 'row_found',
});

const UNDECIDED: Record<Extract<TombstoneOutcome, { kind: 'UNDECIDED' }>['reason'], CheckBackDecision> = {
  LOCK_WAIT_TIMEOUT: 'lock_timeout',
  DEADLOCK: 'deadlock',
  DATABASE_ERROR: 'error',
};

const unknownBecause = (decidedBy: CheckBackDecision, error?: unknown): FenceAnswer => ({
  resolution: TransactionResolution.UNKNOWN,
  decidedBy,
  ...(error !== undefined ? { error } : {}),
});

/** The tombstone attempt's inputs; undefined for a read-only answer (which never writes). */
interface Tombstone {
  store: Pick<TxRecordStore, 'insertTombstone'>;
  record: NewTxRecord;
  lockWaitTimeoutMs: number;
}

/**
 * The decision for one owned txId. `tombstone` undefined: read-only (never writes; no row is
 * UNKNOWN). Never ROLLBACK on a database error: only a tombstone this call inserted, or a
 * ROLLED_BACK row read after the fact, answers ROLLBACK.
 */
async function decide(
  store: TxStatusReader,
  txId: string,
  tombstone: Tombstone | undefined,
): Promise<FenceAnswer> {
  // 1. Read first: a row already there is final (a tx_record's status never changes), one round
  // trip. A plain read never sees an uncommitted row, so "no row" decides nothing by itself.
  let status: TxStatus | undefined;
  try {
    status = await store.readStatus(txId);
  } catch (err) {
    return unknownBecause('error', err);
  }
  if (status !== undefined) return answerRow(status);
  if (!tombstone) return unknownBecause('no_row');
  return decideAbsent(store, txId, tombstone);
}

/** Steps 2 to 4 of decide(), for a txId whose first read found no row. */
async function decideAbsent(store: TxStatusReader, txId: string, tombstone: Tombstone): Promise<FenceAnswer> {
  // 2. Write to decide: the tombstone INSERT waits (bounded) on the producer's uncommitted row,
  // so the database decides once for every instance.
  let outcome: TombstoneOutcome;
  try {
    outcome = await tombstone.store.insertTombstone(tombstone.record, tombstone.lockWaitTimeoutMs);
  } catch (err) {
    outcome = { kind: 'UNDECIDED', reason: 'DATABASE_ERROR', error: err };
  }
  // 3. Classify: inserted -> ROLLBACK (the producer's later insert fails: fenced); undecided
  // (lock-wait timeout, deadlock victim, any error) -> UNKNOWN, the broker asks again.
  if (outcome.kind === 'INSERTED') return { resolution: TransactionResolution.ROLLBACK, decidedBy: 'fenced' };
  if (outcome.kind === 'UNDECIDED') return unknownBecause(UNDECIDED[outcome.reason], outcome.error);
  // 4. The row exists: a fresh read (a new statement after the attempt ended) sees the winner's
  // committed row. Taking the duplicate as COMMIT without reading would deliver a rolled-back one.
  let status: TxStatus | undefined;
  try {
    status = await store.readStatus(txId);
  } catch (err) {
    return unknownBecause('error', err);
  }
  if (status === undefined) return unknownBecause('error', missingRow(txId));
  return answerRow(status);
}

const missingRow = (txId: string) => new Error(`tx_record ${txId} reported as existing but not found`);

// ---- the same decision for many txIds at once (a check-back storm) ----------------------------

/** The primitives of the batched decision (TxRecordStore's optional ones, both required here). */
export type BatchPrimitives = Pick<TxRecordStore, 'readStatus' | 'insertTombstone'> &
  Required<Pick<TxRecordStore, 'readStatuses' | 'insertTombstones'>>;

/** `undefined`: not decided by the batch; decide() it alone (a row of the batch was locked). */
type BatchAnswer = FenceAnswer | undefined;

/**
 * decide() for many owned txIds, each step one statement for all of them:
 * 1. one plain read; a row found answers as in decide();
 * 2. one tombstone INSERT for the txIds without a row, skipping duplicates, in one short
 *    transaction: it commits as a whole (every txId then has a committed row: our tombstone, or the
 *    producer's, written while the INSERT waited on it) or not at all;
 * 3. one fresh read after it: ROLLED_BACK answers ROLLBACK, COMMITTED answers COMMIT, exactly what
 *    decide() answers after INSERTED or EXISTS (a fresh read of our own tombstone is ROLLED_BACK).
 * The INSERT does not wait on a lock (BATCH_LOCK_WAIT_MS): if it meets a producer transaction
 * still open, a deadlock or any error, nothing of it was written and those txIds are decided again
 * one by one by decide() (`undefined`), with the full lock wait, so a producer transaction still
 * open holds back only its own check.
 */
async function decideBatch(
  store: BatchPrimitives,
  records: readonly NewTxRecord[],
  lockWaitTimeoutMs: number,
): Promise<BatchAnswer[]> {
  const ids = records.map((r) => r.txId);
  let found: Map<string, TxRecordState>;
  try {
    found = await store.readStatuses(ids);
  } catch (err) {
    return ids.map(() => unknownBecause('error', err));
  }
  const absent = records.filter((r) => !found.has(r.txId));
  const after = new Map<string, BatchAnswer>();
  if (absent.length === 1) {
    const [record] = absent as [NewTxRecord];
    after.set(record.txId, await decideAbsent(store, record.txId, { store, record, lockWaitTimeoutMs }));
  } else if (absent.length > 1) {
    for (const [txId, answer] of await tombstoneAll(store, absent)) after.set(txId, answer);
  }
  return ids.map((txId) => {
    const row = found.get(txId);
    return row ? answerRow(row.status) : after.get(txId);
  });
}

/** The batched tombstones' lock wait: none (the database's least), see decideBatch. */
const BATCH_LOCK_WAIT_MS = 0;

async function tombstoneAll(
  store: BatchPrimitives,
  absent: readonly NewTxRecord[],
): Promise<Map<string, BatchAnswer>> {
  const ids = absent.map((r) => r.txId);
  const all = (answer: (txId: string) => BatchAnswer) => new Map(ids.map((txId) => [txId, answer(txId)]));
  let outcome: TombstonesOutcome;
  try {
    outcome = await store.insertTombstones(absent, BATCH_LOCK_WAIT_MS);
  } catch (err) {
    outcome = { kind: 'UNDECIDED', reason: 'DATABASE_ERROR', error: err };
  }
  if (outcome.kind === 'UNDECIDED') {
    // Nothing of it was written. One txId: decide() it alone, with the full lock wait. More: the
    // two halves again, so a producer transaction still open is cut out in a few attempts that
    // do not wait, and the rest is still decided in batches.
    if (absent.length === 1) return all(() => undefined);
    const half = Math.ceil(absent.length / 2);
    return new Map([
      ...(await tombstoneAll(store, absent.slice(0, half))),
      ...(await tombstoneAll(store, absent.slice(half))),
    ]);
  }
  let fresh: Map<string, TxRecordState>;
  try {
    fresh = await store.readStatuses(ids);
  } catch (err) {
    return all(() => unknownBecause('error', err));
  }
  return all((txId) => {
    const row = fresh.get(txId);
    if (!row) return unknownBecause('error', missingRow(txId));
    // A CHECK_BACK row is a tombstone: this INSERT's, or (metrics only: the answer is the same
    // ROLLBACK) one another instance committed first; a single insert would say row_found then.
    if (row.resolvedBy === 'CHECK_BACK')
      return { resolution: TransactionResolution.ROLLBACK, decidedBy: 'fenced' };
    return answerRow(row.status);
  });
}

/** How the fence queues and batches its decisions (TransactionalProducer passes checkBack's). */
export interface FenceBatching {
  /** Batches in flight at once, each one database connection at a time (checkBack.concurrency). */
  concurrency: number;
  /** Checks waiting for a free batch; past it a check is answered UNKNOWN (`shed`). */
  maxQueued: number;
  /** txIds per batch; default 100. */
  maxBatch?: number;
}

/** The batching limits, checked (InvalidOptionError naming the bad value). */
function validBatching(b: FenceBatching): Required<FenceBatching> {
  return {
    concurrency: optionalInt('batching.concurrency', b.concurrency, 4, 1, 256),
    maxQueued: optionalInt('batching.maxQueued', b.maxQueued, 256, 0, 100_000),
    maxBatch: optionalInt('batching.maxBatch', b.maxBatch, 100, 1, 1000),
  };
}

interface Waiting {
  readonly record: NewTxRecord;
  readonly resolve: (answer: FenceAnswer) => void;
}

/**
 * A bounded queue in front of the fence: at most `concurrency` batches run; the checks that
 * arrive meanwhile wait (up to `maxQueued`) and go together into the next batch. A check alone
 * in its batch takes decide(), the path the fence exploration covers, unchanged.
 */
class FenceQueue {
  private readonly waiting: Waiting[] = [];
  /** Checks a batch left undecided, decided one by one before new batches. */
  private readonly alone: Waiting[] = [];
  private running = 0;
  private runningAlone = 0;
  private scheduled = false;

  constructor(
    private readonly store: BatchPrimitives,
    private readonly lockWaitTimeoutMs: number,
    private readonly limits: Required<FenceBatching>,
  ) {}

  decide(record: NewTxRecord): Promise<FenceAnswer> {
    const free = Math.max(0, this.limits.concurrency - this.running);
    if (this.waiting.length + this.alone.length >= this.limits.maxQueued + free) {
      return Promise.resolve(unknownBecause('shed'));
    }
    return new Promise((resolve) => {
      this.waiting.push({ record, resolve });
      // Started on the next turn, so that the checks arriving together share a batch.
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.pump();
        });
      }
    });
  }

  private pump(): void {
    // A txId alone may wait the full lock bound on its connection: those take at most
    // concurrency - 1 slots, so one slot keeps deciding batches while open transactions wait.
    const aloneSlots = Math.max(1, this.limits.concurrency - 1);
    while (this.running < this.limits.concurrency) {
      const one = this.runningAlone < aloneSlots ? this.alone.shift() : undefined;
      const batch = one ? [one] : this.waiting.splice(0, this.limits.maxBatch);
      if (batch.length === 0) return;
      this.running++;
      if (one) this.runningAlone++;
      void this.run(batch).finally(() => {
        this.running--;
        if (one) this.runningAlone--;
        this.pump();
      });
    }
  }

  /** A batch of one (a check alone, or one a batch left undecided) takes decide(), the single path. */
  private async run(batch: Waiting[]): Promise<void> {
    const { store, lockWaitTimeoutMs } = this;
    if (batch.length === 1) {
      const [{ record, resolve }] = batch as [Waiting];
      resolve(await decide(store, record.txId, { store, record, lockWaitTimeoutMs }));
      return;
    }
    let answers: BatchAnswer[];
    try {
      answers = await decideBatch(
        store,
        batch.map((w) => w.record),
        lockWaitTimeoutMs,
      );
    } catch (err) {
      answers = batch.map(() => unknownBecause('error', err));
    }
    batch.forEach((w, i) => {
      const answer = answers[i];
      if (answer) w.resolve(answer);
      else this.alone.push(w);
    });
  }
}

// ---- the built-in resolver ---------------------------------------------------------------------

export interface TxRecordResolverOptions {
  producerGroup: string;
  lockWaitTimeoutMs: number;
  logger?: Logger;
  /**
   * The "COMMIT answered -> confirm" step: called with the EVENT_ID of each of our half messages
   * answered COMMIT (by this fence or by a custom resolver), so the event is not republished later.
   */
  onCommitAnswered?: (eventId: string) => void;
  /**
   * Queue and batch the decisions (a check-back storm: one statement per step for many txIds)
   * when the store has readStatuses and insertTombstones; the resolver then bounds its own
   * database work (`bounded`) and answers UNKNOWN (`shed`) past `maxQueued`.
   */
  batching?: FenceBatching;
}

/**
 * The built-in resolver: decides by *writing* the outcome. Insert a ROLLED_BACK tombstone; when
 * the row exists answer its status from a fresh read; on lock-wait timeout, deadlock or any
 * database error answer UNKNOWN, never ROLLBACK.
 */
export class TxRecordResolver implements CheckBackResolver {
  private readonly logger: Logger;
  private readonly inFlight = new Map<string, Promise<DecidedResolution>>();
  private readonly warnedOrigins = new Set<string>();

  private readonly queue: FenceQueue | undefined;

  constructor(
    private readonly store: Pick<
      TxRecordStore,
      'readStatus' | 'insertTombstone' | 'readStatuses' | 'insertTombstones'
    >,
    private readonly options: TxRecordResolverOptions,
  ) {
    this.logger = options.logger ?? noopLogger;
    const batching = options.batching && validBatching(options.batching);
    this.queue =
      batching && store.readStatuses && store.insertTombstones
        ? new FenceQueue(
            {
              readStatus: (txId) => store.readStatus(txId),
              insertTombstone: (record, ms) => store.insertTombstone(record, ms),
              readStatuses: (txIds) => store.readStatuses!(txIds),
              insertTombstones: (records, ms) => store.insertTombstones!(records, ms),
            },
            options.lockWaitTimeoutMs,
            batching,
          )
        : undefined;
  }

  /** @internal Whether this resolver bounds its own database work (a batching queue). */
  get bounded(): boolean {
    return this.queue !== undefined;
  }

  resolve(message: CheckBackMessage): Promise<TransactionResolution> {
    return this.resolveDecision(message).then((d) => d.resolution);
  }

  /** @internal Like resolve(), and says how the answer was decided (CheckBackOutcome.decidedBy, metrics). */
  resolveDecision(message: CheckBackMessage): Promise<DecidedResolution> {
    const { producerGroup } = this.options;
    const owner = ownership(message, producerGroup);
    if (!owner.owned) {
      this.logRefusal(message, owner.decidedBy);
      return Promise.resolve({ resolution: TransactionResolution.UNKNOWN, decidedBy: owner.decidedBy });
    }
    // One fence per txId at a time on this instance: a multi-event transaction is checked once per message.
    const { txId } = owner;
    const pending = this.inFlight.get(txId);
    if (pending) return pending;
    const record: NewTxRecord = { txId, producerGroup, topic: message.topic, eventCount: 0 };
    const tombstone = { store: this.store, record, lockWaitTimeoutMs: this.options.lockWaitTimeoutMs };
    const run = (this.queue ? this.queue.decide(record) : decide(this.store, txId, tombstone))
      .then((answer) => this.logged(answer, txId, message.topic))
      .finally(() => this.inFlight.delete(txId));
    this.inFlight.set(txId, run);
    return run;
  }

  /** The confirm step, for every answer given to a check-back (the built-in's or a custom resolver's). */
  answered(message: CheckBackMessage, resolution: TransactionResolution): void {
    const confirm = this.options.onCommitAnswered;
    if (!confirm || resolution !== TransactionResolution.COMMIT) return;
    const owner = ownership(message, this.options.producerGroup);
    if (owner.owned && owner.eventId !== undefined) confirm(owner.eventId);
  }

  private logged(answer: FenceAnswer, txId: string, topic: string): DecidedResolution {
    const { resolution, decidedBy } = answer;
    if (decidedBy === 'fenced') {
      this.logger.info({ txId, topic }, 'check-back fenced a transaction with no tx_record: ROLLBACK');
    } else if (resolution === TransactionResolution.UNKNOWN) {
      this.logger.warn(
        { txId, topic, decidedBy, ...errorFields(toStoreError('check-back fence', answer.error)) },
        'check-back undecided; the broker will ask again',
      );
    }
    return { resolution, decidedBy };
  }

  private logRefusal(
    message: CheckBackMessage,
    decidedBy: Exclude<Ownership, { owned: true }>['decidedBy'],
  ): void {
    if (decidedBy === 'malformed') {
      this.logger.warn(
        {
          topic: message.topic,
          messageId: message.messageId,
          ...(isUuid(message.txId ?? '') ? { txId: message.txId } : {}),
        },
        'check-back with a malformed TX_ID or EVENT_ID',
      );
    } else if (decidedBy === 'foreign_origin') {
      const origin = message.origin ?? '(none)';
      if (this.warnedOrigins.has(origin)) return;
      this.warnedOrigins.add(origin);
      this.logger.warn(
        { origin, producerGroup: this.options.producerGroup, topic: message.topic },
        'check-back for a transaction of another producerGroup: not ours to decide, answering UNKNOWN',
      );
    }
  }
}

// ---- read-only mode (the relay) ----------------------------------------------------------------

/**
 * A check-back answered by a component that holds no fence (the relay): the same guards (but no
 * producerGroup: a half message of another database simply has no row here) and the same read,
 * never a tombstone. A row answers; no row or a failed read is UNKNOWN, so a producer decides.
 */
export async function answerReadOnly(
  reader: TxStatusReader,
  message: CheckBackMessage,
  logger: Logger,
): Promise<DecidedResolution> {
  const owner = ownership(message, undefined);
  if (!owner.owned) return { resolution: TransactionResolution.UNKNOWN, decidedBy: owner.decidedBy };
  const answer = await decide(reader, owner.txId, undefined);
  if (answer.error !== undefined) {
    logger.warn(
      { ...errorFields(answer.error), txId: owner.txId },
      'relay check-back read failed; answering UNKNOWN',
    );
  }
  return { resolution: answer.resolution, decidedBy: answer.decidedBy };
}
