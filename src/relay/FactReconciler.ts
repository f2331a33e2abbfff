import { InvalidMessageError, InvalidOptionError } from '../errors';
import { notInitialized } from '../util/clientOptions';
import { outboxRows, prepareEvents } from '../outbox/events';
import type { NewOutboxEvent } from '../store/ports';
import { TypeOrmFactStore, type FactEventRow } from '../store/typeorm/outboxFacts';
import { dialectFor } from '../store/typeorm/dialect';
import { rerunLockVictims } from '../store/typeorm/lockRetry';
import { toStoreError } from '../store/typeorm/storeError';
import { isPlainObject } from '../util/validate';
import { uuidv7 } from '../util/uuidv7';
import {
  resolveFactReconcilerOptions,
  type Fact,
  type FactPage,
  type FactReconcilerOptions,
  type ResolvedFactReconcilerOptions,
} from './factReconcilerOptions';

/** What happened to a fact that had no event. */
export interface MissingFact<F extends Fact = Fact> {
  fact: F;
  /**
   * reported: dry run; republished: written as a NEW outbox row (eventId) that the relay
   * delivers; refused: the write hit a unique key (that eventId or aggregate version exists).
   */
  outcome: 'reported' | 'republished' | 'refused';
  eventId?: string;
}

export interface ReconcileProgress {
  pages: number;
  checked: number;
  ok: number;
  missing: number;
  pendingDelivery: number;
  dead: number;
  republished: number;
  refused: number;
  elapsedMs: number;
}

export interface ReconcileReport<F extends Fact = Fact> {
  dryRun: boolean;
  pages: number;
  /** Facts read from the fact source. */
  checked: number;
  /** Facts with a SENT event (live or archived). */
  ok: number;
  /** Facts with no event row at all (the first `maxReportedMissing`; `missingCount` counts all). */
  missing: MissingFact<F>[];
  missingCount: number;
  /** Facts whose event row exists but is not delivered yet (NEW or IN_FLIGHT). */
  pendingDelivery: number;
  /** Facts whose only event rows are DEAD (replay them with OutboxRelay.replayDead). */
  dead: number;
  /** DEAD event ids, at most `maxReportedMissing`. */
  deadEventIds: string[];
  /** Missing events written as NEW outbox rows. */
  republished: number;
  /** Missing events whose write was refused by a unique key (written meanwhile by someone else). */
  refused: number;
  durationMs: number;
}

export interface ReconcileRunOptions {
  /** true: report only. Default: the opposite of options.republish (a dry run unless it is set). */
  dryRun?: boolean;
  /** Called after each page. */
  onProgress?: (progress: ReconcileProgress) => void;
}

type Verdict = 'ok' | 'pending' | 'dead' | 'missing';

/**
 * Compares facts that must have an event (a user-supplied, keyset-paginated query) with
 * outbox_event (and outbox_event_archive), and reports what is missing, undelivered or DEAD.
 * With republish, a missing event becomes a NEW outbox row (new eventId, in a short transaction
 * per page) that the OutboxRelay delivers: never a direct broker send that could go unrecorded.
 */
export class FactReconciler<F extends Fact = Fact, C = unknown> {
  private readonly o: ResolvedFactReconcilerOptions<F, C>;
  private readonly store: TypeOrmFactStore;

  constructor(options: FactReconcilerOptions<F, C>) {
    this.o = resolveFactReconcilerOptions<F, C>(options);
    this.store = new TypeOrmFactStore(this.o.dataSource);
  }

  async run(runOptions: ReconcileRunOptions = {}): Promise<ReconcileReport<F>> {
    if (!isPlainObject(runOptions)) throw new InvalidOptionError('run options', runOptions, 'an object');
    const dryRun = runOptions.dryRun ?? !this.o.republish;
    if (typeof dryRun !== 'boolean') throw new InvalidOptionError('dryRun', dryRun, 'true or false');
    if (runOptions.onProgress !== undefined && typeof runOptions.onProgress !== 'function') {
      throw new InvalidOptionError('onProgress', runOptions.onProgress, 'a function');
    }
    if (!dryRun && !this.o.buildEvent) {
      throw new InvalidOptionError('dryRun', dryRun, 'true (no buildEvent was given to republish with)');
    }
    if (!this.o.dataSource.isInitialized) {
      throw notInitialized();
    }
    const started = Date.now();
    const withArchive = this.o.includeArchive ?? (await this.store.archiveExists());
    const report: ReconcileReport<F> = {
      dryRun,
      pages: 0,
      checked: 0,
      ok: 0,
      missing: [],
      missingCount: 0,
      pendingDelivery: 0,
      dead: 0,
      deadEventIds: [],
      republished: 0,
      refused: 0,
      durationMs: 0,
    };
    let cursor: C | undefined;
    const seenCursors = new Set<string>();
    for (;;) {
      const page = await this.readPage(cursor, report.pages);
      report.pages++;
      const facts = page.facts;
      const rows = indexRows(
        await this.store
          .findRows(facts, withArchive)
          .catch((err: unknown) =>
            Promise.reject(toStoreError('fact reconciliation: outbox lookup failed', err)),
          ),
      );
      const missing: F[] = [];
      for (const fact of facts) {
        const verdict = judge(fact, rows);
        report.checked++;
        if (verdict.kind === 'ok') report.ok++;
        else if (verdict.kind === 'pending') report.pendingDelivery++;
        else if (verdict.kind === 'dead') {
          report.dead++;
          for (const id of verdict.eventIds) {
            if (report.deadEventIds.length < this.o.maxReportedMissing) report.deadEventIds.push(id);
          }
        } else missing.push(fact);
      }
      report.missingCount += missing.length;
      const outcomes = dryRun
        ? missing.map((fact): MissingFact<F> => ({ fact, outcome: 'reported' }))
        : await this.republish(missing, report.pages);
      for (const m of outcomes) {
        if (m.outcome === 'republished') report.republished++;
        if (m.outcome === 'refused') report.refused++;
        if (report.missing.length < this.o.maxReportedMissing) report.missing.push(m);
      }
      runOptions.onProgress?.({
        pages: report.pages,
        checked: report.checked,
        ok: report.ok,
        missing: report.missingCount,
        pendingDelivery: report.pendingDelivery,
        dead: report.dead,
        republished: report.republished,
        refused: report.refused,
        elapsedMs: Date.now() - started,
      });
      const next = page.nextCursor;
      if (next === undefined || next === null || facts.length === 0) break;
      const key = cursorKey(next);
      if (key !== undefined) {
        if (seenCursors.has(key)) {
          throw new InvalidMessageError(
            `facts page ${report.pages}.nextCursor`,
            key,
            'a cursor not returned before (the fact source would loop forever)',
          );
        }
        seenCursors.add(key);
      }
      cursor = next;
    }
    report.durationMs = Date.now() - started;
    this.o.logger.info(
      {
        dryRun,
        checked: report.checked,
        ok: report.ok,
        missing: report.missingCount,
        pendingDelivery: report.pendingDelivery,
        dead: report.dead,
        republished: report.republished,
        refused: report.refused,
        durationMs: report.durationMs,
      },
      'fact reconciliation finished',
    );
    return report;
  }

  private async readPage(cursor: C | undefined, index: number): Promise<FactPage<F, C>> {
    const { batchSize: limit, since, until, dataSource } = this.o;
    const page: unknown = await this.o.facts({
      cursor,
      limit,
      ...(since ? { since } : {}),
      ...(until ? { until } : {}),
      dataSource,
    });
    const path = `facts page ${index + 1}`;
    if (!isPlainObject(page) || !Array.isArray(page.facts)) {
      throw new InvalidMessageError(path, page, 'an object { facts: Fact[], nextCursor? }');
    }
    if (page.facts.length > limit) {
      throw new InvalidMessageError(
        `${path}.facts`,
        page.facts,
        `at most ${limit} facts (the limit asked for)`,
      );
    }
    page.facts.forEach((f: unknown, i: number) => validateFact(f, `${path}.facts[${i}]`));
    return page as unknown as FactPage<F, C>;
  }

  /** Builds each missing fact's event, then writes them all in one short transaction. */
  private async republish(missing: F[], pageNumber: number): Promise<MissingFact<F>[]> {
    if (missing.length === 0) return [];
    const build = this.o.buildEvent!;
    const rules = {
      topics: this.o.topics,
      maxMessageBytes: this.o.maxMessageBytes,
      producerGroup: this.o.producerGroup!,
    };
    const rows: NewOutboxEvent[] = [];
    for (const [i, fact] of missing.entries()) {
      const built = await build(fact, { dataSource: this.o.dataSource });
      const path = `buildEvent(facts page ${pageNumber}, missing[${i}])`;
      const txId = uuidv7();
      const prepared = prepareEvents(built, txId, rules);
      const envelope = prepared[0]!.envelope;
      if (!envelope) throw new InvalidMessageError(path, built, 'an envelope event { topic, event }');
      for (const field of ['aggregateType', 'aggregateId', 'eventType'] as const) {
        if (envelope[field] !== fact[field]) {
          throw new InvalidMessageError(
            `${path}.event.${field}`,
            envelope[field],
            `the fact's ${field} (${fact[field]})`,
          );
        }
      }
      if (fact.aggregateVersion !== undefined && envelope.aggregateVersion !== fact.aggregateVersion) {
        throw new InvalidMessageError(
          `${path}.event.aggregateVersion`,
          envelope.aggregateVersion,
          `the fact's aggregateVersion (${fact.aggregateVersion})`,
        );
      }
      rows.push(...outboxRows(txId, prepared, 'NEW'));
    }
    const written = await this.write(rows);
    if (written.size < rows.length) {
      this.o.logger.warn(
        { refused: rows.length - written.size },
        'some missing events were written meanwhile (refused by a unique key)',
      );
    }
    return missing.map((fact, i) => {
      const eventId = rows[i]!.eventId;
      return written.has(eventId)
        ? { fact, outcome: 'republished' as const, eventId }
        : { fact, outcome: 'refused' as const };
    });
  }

  /** One short transaction; run again after a deadlock (two reconcilers inserting the same keys). */
  private async write(rows: NewOutboxEvent[]): Promise<Set<string>> {
    try {
      return await rerunLockVictims(
        dialectFor(this.o.dataSource),
        WRITE_ATTEMPTS,
        () =>
          this.o.dataSource.transaction((manager) =>
            this.store.insertMissing(manager, rows, this.o.producerGroup!),
          ),
        (attempt) =>
          this.o.logger.warn({ attempt }, 'republish transaction was a deadlock victim; running it again'),
      );
    } catch (err) {
      throw toStoreError('fact reconciliation: writing the missing events failed (nothing written)', err);
    }
  }
}

const WRITE_ATTEMPTS = 3;

const keyOf = (type: string, id: string, eventType: string | null) => `${type}\u0000${id}\u0000${eventType}`;

function indexRows(rows: readonly FactEventRow[]): Map<string, FactEventRow[]> {
  const index = new Map<string, FactEventRow[]>();
  for (const r of rows) {
    const key = keyOf(r.aggregateType, r.aggregateId, r.eventType);
    const list = index.get(key);
    if (list) list.push(r);
    else index.set(key, [r]);
  }
  return index;
}

/** SENT anywhere: ok; else NEW/IN_FLIGHT: pending; else DEAD: dead; no row: missing. */
function judge(fact: Fact, index: Map<string, FactEventRow[]>): { kind: Verdict; eventIds: string[] } {
  const mine = (index.get(keyOf(fact.aggregateType, fact.aggregateId, fact.eventType)) ?? []).filter(
    (r) => fact.aggregateVersion === undefined || r.aggregateVersion === fact.aggregateVersion,
  );
  if (mine.length === 0) return { kind: 'missing', eventIds: [] };
  if (mine.some((r) => r.status === 'SENT')) return { kind: 'ok', eventIds: [] };
  if (mine.some((r) => r.status === 'NEW' || r.status === 'IN_FLIGHT'))
    return { kind: 'pending', eventIds: [] };
  return { kind: 'dead', eventIds: mine.map((r) => r.eventId) };
}

function validateFact(value: unknown, path: string): void {
  if (!isPlainObject(value)) {
    throw new InvalidMessageError(
      path,
      value,
      'a fact { aggregateType, aggregateId, eventType, aggregateVersion? }',
    );
  }
  for (const field of ['aggregateType', 'aggregateId', 'eventType'] as const) {
    const v = value[field];
    if (typeof v !== 'string' || v.length === 0 || v.length > 255) {
      throw new InvalidMessageError(`${path}.${field}`, v, 'a non-empty string of at most 255 characters');
    }
  }
  const v = value.aggregateVersion;
  if (v !== undefined && (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1)) {
    throw new InvalidMessageError(`${path}.aggregateVersion`, v, 'absent or a positive integer');
  }
}

/** A comparable form of a cursor (to stop a source that loops), or undefined if it has none. */
function cursorKey(cursor: unknown): string | undefined {
  try {
    return JSON.stringify(cursor);
  } catch {
    return undefined;
  }
}
