import type { DataSource } from 'typeorm';
import { InvalidOptionError } from '../errors';
import { MAX_MESSAGE_BYTES, type EnvelopeEvent } from '../outbox/events';
import { requireDataSource, requireResourceName } from '../util/clientOptions';
import { noopLogger, type Logger } from '../util/logger';
import {
  optionalBoolean,
  optionalFunctionsOf,
  optionalInt,
  rejectUnknownKeys,
  requireObject,
} from '../util/validate';

/** A business fact that must have an event: an event of `eventType` for this aggregate. */
export interface Fact {
  aggregateType: string;
  aggregateId: string;
  eventType: string;
  /** When given, only the event of exactly this aggregate version satisfies the fact. */
  aggregateVersion?: number;
}

/** What the fact source is asked for: the page after `cursor` (keyset pagination). */
export interface FactPageRequest<C = unknown> {
  /** undefined for the first page, then the `nextCursor` of the previous page. */
  cursor: C | undefined;
  /** Return at most this many facts. */
  limit: number;
  /** The run's time window, if one was configured (apply it to your facts' own timestamps). */
  since?: Date;
  until?: Date;
  /** The reconciler's DataSource, to query your tables with. */
  dataSource: DataSource;
}

export interface FactPage<F extends Fact = Fact, C = unknown> {
  facts: readonly F[];
  /** Where the next page starts; null or absent when this was the last page. */
  nextCursor?: C | null;
}

export type FactSource<F extends Fact = Fact, C = unknown> = (
  request: FactPageRequest<C>,
) => Promise<FactPage<F, C>>;

/**
 * Builds the event of a fact that has none (only called when republishing). It must be an
 * envelope event with the fact's aggregateType, aggregateId and eventType (and aggregateVersion,
 * when the fact names one); a new eventId (createEnvelope generates one).
 */
export type FactEventBuilder<F extends Fact = Fact> = (
  fact: F,
  context: { dataSource: DataSource },
) => EnvelopeEvent | Promise<EnvelopeEvent>;

export interface FactReconcilerOptions<F extends Fact = Fact, C = unknown> {
  /** An initialized DataSource on the SDK's tables (and, usually, your business tables). */
  dataSource: DataSource;
  /** Pages through the facts that must have an event. */
  facts: FactSource<F, C>;
  /** Builds a missing fact's event; required to republish. */
  buildEvent?: FactEventBuilder<F>;
  /**
   * The producer group that owns the republished events (TX_ORIGIN, tx_record.producer_group):
   * its producers answer the broker's check-back for them. Required with buildEvent.
   */
  producerGroup?: string;
  /** Topics the built events may go to (as a producer's `topics`). Required with buildEvent. */
  topics?: readonly string[];
  /** Write missing events as NEW outbox rows unless run({ dryRun: true }). Default false (dry run). */
  republish?: boolean;
  /** Facts per page (one lookup statement and at most one short write transaction each). Default 500. */
  batchSize?: number;
  /** Passed to the fact source as the time window. */
  since?: Date;
  until?: Date;
  /** Also look in outbox_event_archive. Default: when that table exists. */
  includeArchive?: boolean;
  /** Missing facts listed in the report (all are counted). Default 1000. */
  maxReportedMissing?: number;
  /** Upper bound of a built event's body. Default 4 MiB (the broker's default). */
  maxMessageBytes?: number;
  logger?: Logger;
}

export interface ResolvedFactReconcilerOptions<F extends Fact, C> {
  dataSource: DataSource;
  facts: FactSource<F, C>;
  buildEvent?: FactEventBuilder<F>;
  producerGroup?: string;
  topics: readonly string[];
  republish: boolean;
  batchSize: number;
  since?: Date;
  until?: Date;
  includeArchive?: boolean;
  maxReportedMissing: number;
  maxMessageBytes: number;
  logger: Logger;
}

const KNOWN = [
  'dataSource',
  'facts',
  'buildEvent',
  'producerGroup',
  'topics',
  'republish',
  'batchSize',
  'since',
  'until',
  'includeArchive',
  'maxReportedMissing',
  'maxMessageBytes',
  'logger',
];

function optionalDate(option: string, value: unknown): Date | undefined {
  if (value === undefined) return undefined;
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new InvalidOptionError(option, value, 'a valid Date');
  }
  return new Date(value.getTime());
}

export function resolveFactReconcilerOptions<F extends Fact, C>(
  input: unknown,
): ResolvedFactReconcilerOptions<F, C> {
  const o = requireObject('options', input);
  rejectUnknownKeys('options', o, KNOWN);
  const dataSource = requireDataSource(o.dataSource);
  if (typeof o.facts !== 'function') {
    throw new InvalidOptionError(
      'facts',
      o.facts,
      'a function ({ cursor, limit, ... }) => Promise<{ facts, nextCursor }>',
    );
  }
  if (o.buildEvent !== undefined && typeof o.buildEvent !== 'function') {
    throw new InvalidOptionError('buildEvent', o.buildEvent, 'a function (fact) => an envelope event');
  }
  const republish = optionalBoolean('republish', o.republish, false);
  const canBuild = o.buildEvent !== undefined;
  if (republish && !canBuild) {
    throw new InvalidOptionError('buildEvent', o.buildEvent, 'a function when republish is true');
  }
  let producerGroup: string | undefined;
  let topics: string[] = [];
  if (canBuild) {
    producerGroup = requireResourceName('producerGroup', o.producerGroup);
    if (!Array.isArray(o.topics) || o.topics.length === 0) {
      throw new InvalidOptionError(
        'topics',
        o.topics,
        'a non-empty array of topic names when buildEvent is given',
      );
    }
    topics = Array.from(o.topics, (t: unknown, i: number) => requireResourceName(`topics[${i}]`, t));
  } else {
    for (const name of ['producerGroup', 'topics'] as const) {
      if (o[name] !== undefined)
        throw new InvalidOptionError(name, o[name], 'nothing unless buildEvent is given');
    }
  }
  const since = optionalDate('since', o.since);
  const until = optionalDate('until', o.until);
  if (since && until && since.getTime() >= until.getTime()) {
    throw new InvalidOptionError('until', until, `a Date after since (${since.toISOString()})`);
  }
  const includeArchive =
    o.includeArchive === undefined ? undefined : optionalBoolean('includeArchive', o.includeArchive, false);
  return {
    dataSource,
    facts: o.facts as FactSource<F, C>,
    ...(canBuild ? { buildEvent: o.buildEvent as FactEventBuilder<F> } : {}),
    ...(producerGroup ? { producerGroup } : {}),
    topics,
    republish,
    batchSize: optionalInt('batchSize', o.batchSize, 500, 1, 5000),
    ...(since ? { since } : {}),
    ...(until ? { until } : {}),
    ...(includeArchive !== undefined ? { includeArchive } : {}),
    maxReportedMissing: optionalInt('maxReportedMissing', o.maxReportedMissing, 1000, 0, 1_000_000),
    maxMessageBytes: optionalInt(
      'maxMessageBytes',
      o.maxMessageBytes,
      MAX_MESSAGE_BYTES,
      1,
      MAX_MESSAGE_BYTES,
    ),
    logger: optionalFunctionsOf<Logger>('logger', o.logger, ['debug', 'info', 'warn', 'error']) ?? noopLogger,
  };
}
