import type { DataSource } from 'typeorm';
import { dialectFor } from '../store/typeorm/dialect';
import { requireDataSource } from '../util/clientOptions';
import { noopLogger, type Logger } from '../util/logger';
import { optionalFunctionsOf, optionalInt, rejectUnknownKeys, requireObject } from '../util/validate';

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
  /** Rows per DELETE statement (each a short autocommit statement). Default 1000. */
  batchSize?: number;
  /** Upper bound of statements per table in one purge() call. Default 1000. */
  maxBatchesPerTable?: number;
  logger?: Logger;
}

export interface RetentionReport {
  outboxEvents: number;
  txRecords: number;
  consumedEvents: number;
  batches: number;
  durationMs: number;
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

/**
 * Purges what nothing can still need, in bounded batches of short statements (never one long
 * transaction over the hot tables):
 * - outbox_event: only SENT rows published before the age (NEW, IN_FLIGHT and DEAD stay);
 * - tx_record: only rows older than max(age, check-back horizon) with no outbox row left that is
 *   not SENT (the fence and the discard reconciliation still read those);
 * - consumed_event: only rows older than their own age (the dedupe window).
 */
export class Retention {
  private readonly dataSource: DataSource;
  private readonly o: Required<Omit<RetentionOptions, 'dataSource' | 'logger'>>;
  private readonly logger: Logger;

  constructor(options: RetentionOptions) {
    const raw = requireObject('options', options);
    rejectUnknownKeys('options', raw, KNOWN);
    this.dataSource = requireDataSource(raw.dataSource);
    dialectFor(this.dataSource);
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

  async purge(): Promise<RetentionReport> {
    const started = Date.now();
    const report: RetentionReport = {
      outboxEvents: 0,
      txRecords: 0,
      consumedEvents: 0,
      batches: 0,
      durationMs: 0,
    };
    const cutoff = 'CURRENT_TIMESTAMP(3) - INTERVAL ? MICROSECOND';
    // Outbox first, so a settled transaction's tx_record has no row left that holds it back.
    report.outboxEvents = await this.batched(
      report,
      `DELETE FROM outbox_event WHERE status = 'SENT' AND published_at < ${cutoff} LIMIT ?`,
      this.o.olderThanMs,
    );
    report.txRecords = await this.batched(
      report,
      `DELETE FROM tx_record WHERE created_at < ${cutoff}
         AND NOT EXISTS (SELECT 1 FROM outbox_event o WHERE o.tx_id = tx_record.tx_id AND o.status <> 'SENT')
       LIMIT ?`,
      Math.max(this.o.olderThanMs, this.o.checkBackHorizonMs),
    );
    report.consumedEvents = await this.batched(
      report,
      `DELETE FROM consumed_event WHERE consumed_at < ${cutoff} LIMIT ?`,
      this.o.consumedEventOlderThanMs,
    );
    report.durationMs = Date.now() - started;
    this.logger.info({ ...report }, 'retention purge finished');
    return report;
  }

  private async batched(report: RetentionReport, sql: string, ageMs: number): Promise<number> {
    let total = 0;
    for (let i = 0; i < this.o.maxBatchesPerTable; i++) {
      const res: unknown = await this.dataSource.query(sql, [ageMs * 1000, this.o.batchSize]);
      const affected = Number((res as { affectedRows?: number }).affectedRows ?? 0);
      report.batches++;
      total += affected;
      if (affected < this.o.batchSize) break;
    }
    return total;
  }
}
