import type { DataSource } from 'typeorm';
import { dialectFor, isDatabaseError } from '../store/typeorm/dialect';
import { requireDataSource } from '../util/clientOptions';
import { noopLogger, type Logger } from '../util/logger';
import { InvalidOptionError, StoreError } from '../errors';
import { OUTBOX_ARCHIVE_TABLE, TypeOrmFactStore } from '../store/typeorm/outboxFacts';
import { rerunLockVictims } from '../store/typeorm/lockRetry';
import { TypeOrmRetentionStore, type RetentionAges } from '../store/typeorm/retentionStore';
import { toStoreError } from '../store/typeorm/storeError';
import {
  isPlainObject,
  optionalFunctionsOf,
  optionalInt,
  rejectUnknownKeys,
  requireObject,
} from '../util/validate';

const DAY = 24 * 3600 * 1000;

export interface RetentionOptions {
  /** An initialized DataSource on the SDK's tables. */
  dataSource: DataSource;
  /** SENT outbox rows and settled tx_records older than this go. Default 7 days. */
  olderThanMs?: number;
  /**
   * consumed_event rows older than this go. Must exceed the broker's message retention (default
   * 72 h) plus the relay's republish horizon, or a late redelivery is applied twice. Default 7 days.
   */
  consumedEventOlderThanMs?: number;
  /**
   * The broker's check-back horizon (transactionTimeOut + transactionCheckMax x
   * transactionCheckInterval; 6 s + 15 x 60 s by default). A tx_record younger than
   * max(olderThanMs, this) is kept: the fence may still be asked. Default 30 min.
   */
  checkBackHorizonMs?: number;
  /** Rows per DELETE statement (a short autocommit statement) or per archive transaction. Default 1000. */
  batchSize?: number;
  /** Upper bound of batches per table in one purge() or archive() call. Default 1000. */
  maxBatchesPerTable?: number;
  logger?: Logger;
}

export type RetentionTable = 'outbox_event' | 'tx_record' | 'consumed_event';

export interface RetentionReport {
  /** purge: rows deleted; archive: outbox_event rows moved to outbox_event_archive, the rest deleted. */
  mode: 'purge' | 'archive';
  outboxEvents: number;
  txRecords: number;
  consumedEvents: number;
  batches: number;
  durationMs: number;
}

/** How many rows are eligible now (a dry run: nothing is changed). */
export interface RetentionPlan {
  outboxEvents: number;
  txRecords: number;
  consumedEvents: number;
  durationMs: number;
}

export interface RetentionProgress {
  mode: 'purge' | 'archive';
  table: RetentionTable;
  /** Rows of this table done so far in this call. */
  rows: number;
  batches: number;
}

export interface RetentionRunOptions {
  /** Called after each batch. */
  onProgress?: (progress: RetentionProgress) => void;
}

/** @internal Test seam: runs inside each archive transaction, after the copy, before the delete. */
export interface RetentionInternals {
  beforeArchiveDelete?: (eventIds: readonly string[]) => Promise<void>;
}

const KNOWN = [
  'dataSource',
  'olderThanMs',
  'consumedEventOlderThanMs',
  'checkBackHorizonMs',
  'batchSize',
  'maxBatchesPerTable',
  'logger',
];

const BATCH_ATTEMPTS = 5;

/**
 * Removes what nothing can still need, in bounded batches of short statements (never one long
 * transaction over the hot tables):
 * - outbox_event: only SENT rows published before the age (NEW, IN_FLIGHT and DEAD stay);
 *   archive() moves them to outbox_event_archive instead of deleting them;
 * - tx_record: only rows older than max(age, check-back horizon) with no outbox row left that is
 *   not SENT (the fence and the discard reconciliation still read those);
 * - consumed_event: only rows older than their own age (the dedupe window).
 */
export class Retention {
  private readonly dataSource: DataSource;
  private readonly o: Required<Omit<RetentionOptions, 'dataSource' | 'logger'>>;
  private readonly logger: Logger;
  private readonly internals: RetentionInternals;
  private readonly store: TypeOrmRetentionStore;

  constructor(options: RetentionOptions);
  /** @internal */
  constructor(options: RetentionOptions, internals?: RetentionInternals);
  constructor(options: RetentionOptions, internals: RetentionInternals = {}) {
    this.internals = internals;
    const raw = requireObject('options', options);
    rejectUnknownKeys('options', raw, KNOWN);
    this.dataSource = requireDataSource(raw.dataSource);
    this.store = new TypeOrmRetentionStore(this.dataSource);
    const olderThanMs = optionalInt('olderThanMs', raw.olderThanMs, 7 * DAY, 1000, 3650 * DAY);
    this.o = {
      olderThanMs,
      consumedEventOlderThanMs: optionalInt(
        'consumedEventOlderThanMs',
        raw.consumedEventOlderThanMs,
        7 * DAY,
        1000,
        3650 * DAY,
      ),
      checkBackHorizonMs: optionalInt(
        'checkBackHorizonMs',
        raw.checkBackHorizonMs,
        30 * 60_000,
        1000,
        30 * DAY,
      ),
      batchSize: optionalInt('batchSize', raw.batchSize, 1000, 1, 100_000),
      maxBatchesPerTable: optionalInt('maxBatchesPerTable', raw.maxBatchesPerTable, 1000, 1, 1_000_000),
    };
    this.logger =
      optionalFunctionsOf<Logger>('logger', raw.logger, ['debug', 'info', 'warn', 'error']) ?? noopLogger;
  }

  /** The ages past which rows may go (the rules themselves live in the store, per database). */
  private ages(): RetentionAges {
    return {
      outboxMs: this.o.olderThanMs,
      txRecordMs: Math.max(this.o.olderThanMs, this.o.checkBackHorizonMs),
      consumedMs: this.o.consumedEventOlderThanMs,
    };
  }

  /** Deletes every eligible row (SENT outbox rows included). */
  purge(run: RetentionRunOptions = {}): Promise<RetentionReport> {
    return this.execute('purge', run);
  }

  /**
   * Moves eligible SENT outbox rows to outbox_event_archive (CreateOutboxEventArchive migration):
   * per batch one short transaction copies and deletes the same keys, so an interrupted run
   * leaves each row in exactly one of the two tables. tx_record and consumed_event are purged
   * as by purge() (they have no archive).
   */
  archive(run: RetentionRunOptions = {}): Promise<RetentionReport> {
    return this.execute('archive', run);
  }

  /** Counts what purge() or archive() would take now; changes nothing. */
  async plan(): Promise<RetentionPlan> {
    const started = Date.now();
    const ages = this.ages();
    const count = async (table: RetentionTable) => {
      try {
        return await this.store.count(table, ages);
      } catch (err) {
        throw toStoreError(`retention plan: counting ${table} failed`, err);
      }
    };
    return {
      outboxEvents: await count('outbox_event'),
      txRecords: await count('tx_record'),
      consumedEvents: await count('consumed_event'),
      durationMs: Date.now() - started,
    };
  }

  private async execute(mode: 'purge' | 'archive', run: RetentionRunOptions): Promise<RetentionReport> {
    if (!isPlainObject(run)) throw new InvalidOptionError('run options', run, 'an object { onProgress? }');
    const { onProgress } = run as RetentionRunOptions;
    if (onProgress !== undefined && typeof onProgress !== 'function') {
      throw new InvalidOptionError('onProgress', onProgress, 'a function');
    }
    if (mode === 'archive') await this.requireArchiveTable();
    const started = Date.now();
    const report: RetentionReport = {
      mode,
      outboxEvents: 0,
      txRecords: 0,
      consumedEvents: 0,
      batches: 0,
      durationMs: 0,
    };
    const ages = this.ages();
    const progress = (table: RetentionTable) => (rows: number, batches: number) =>
      onProgress?.({ mode, table, rows, batches });
    // Outbox first, so a settled transaction's tx_record has no row left that holds it back.
    report.outboxEvents = await this.batched(
      report,
      mode === 'archive'
        ? () => this.store.archiveBatch(ages, this.o.batchSize, this.internals.beforeArchiveDelete)
        : () => this.store.deleteBatch('outbox_event', ages, this.o.batchSize),
      'outbox_event',
      progress('outbox_event'),
    );
    report.txRecords = await this.batched(
      report,
      () => this.store.deleteBatch('tx_record', ages, this.o.batchSize),
      'tx_record',
      progress('tx_record'),
    );
    report.consumedEvents = await this.batched(
      report,
      () => this.store.deleteBatch('consumed_event', ages, this.o.batchSize),
      'consumed_event',
      progress('consumed_event'),
    );
    report.durationMs = Date.now() - started;
    this.logger.info({ ...report }, `retention ${mode} finished`);
    return report;
  }

  private async batched(
    report: RetentionReport,
    batch: () => Promise<number>,
    table: RetentionTable,
    onBatch: (rows: number, batches: number) => void,
  ): Promise<number> {
    let total = 0;
    for (let i = 0; i < this.o.maxBatchesPerTable; i++) {
      const affected = await this.runBatch(report, batch, table);
      report.batches++;
      total += affected;
      onBatch(total, i + 1);
      if (affected < this.o.batchSize) break;
    }
    return total;
  }

  /**
   * A batch is one statement or one short transaction: a deadlock or lock-wait victim was rolled
   * back whole by InnoDB, so it runs again (parallel archivers, the relay and purges touch the
   * same index pages). A database failure, or the last attempt's, is a StoreError
   * (StoreAccessDeniedError for a missing privilege); rows of earlier batches stay removed.
   */
  private async runBatch(
    report: RetentionReport,
    batch: () => Promise<number>,
    table: RetentionTable,
  ): Promise<number> {
    const dialect = dialectFor(this.dataSource);
    try {
      return await rerunLockVictims(dialect, BATCH_ATTEMPTS, batch, async (attempt, kind) => {
        this.logger.warn({ table, attempt, kind }, 'retention batch lost a lock; running it again');
        await sleep(Math.floor(Math.random() * 50 * attempt));
      });
    } catch (err) {
      if (dialect.classify(err) === 'OTHER' && !isDatabaseError(err)) throw err;
      throw toStoreError(`retention ${report.mode}: a batch of ${table} failed`, err);
    }
  }

  private async requireArchiveTable(): Promise<void> {
    if (await new TypeOrmFactStore(this.dataSource).archiveExists()) return;
    throw new StoreError(
      `${OUTBOX_ARCHIVE_TABLE} does not exist: add rocketMqTxArchiveMigrations (CreateOutboxEventArchive1764634100000) to your migrations and run them`,
      undefined,
      false,
    );
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
