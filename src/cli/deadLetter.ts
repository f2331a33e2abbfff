import type { DataSource } from 'typeorm';
import { TypeOrmOutboxStore } from '../index';
import {
  TypeOrmDeadLetterReader,
  type DeadEventRow,
  type DeadFilter,
} from '../store/typeorm/deadLetterStore';
import {
  boolFlag,
  COMMON_FLAGS,
  DB_FLAGS,
  intFlag,
  invalid,
  JSON_FLAG,
  topicsFlag,
  UsageError,
  type Command,
  type ParsedFlags,
} from './args';
import { resolveDbTarget, withDatabase } from './connection';
import { formatAge, note, printJson, renderTable, type Io } from './output';

export const deadLetterFlags = {
  ...DB_FLAGS,
  topic: { type: 'string', multiple: true, value: '<t1,t2>', description: 'only DEAD rows of these topics' },
  'event-id': {
    type: 'string',
    multiple: true,
    value: '<id>',
    description: 'only these events (comma-separated)',
  },
  all: { type: 'boolean', description: 'replay: every DEAD row (of --topic, when given)' },
  'dry-run': { type: 'boolean', description: 'replay: show what would be replayed, change nothing' },
  limit: { type: 'string', value: '<n>', description: 'list: rows shown (default 100; all are counted)' },
  ...JSON_FLAG,
  ...COMMON_FLAGS,
} as const satisfies Command['flags'];

const EVENT_ID_RE = /^[0-9A-Za-z-]{1,36}$/;
const BATCH = 500;

export type DeadEvent = DeadEventRow;

type Filter = DeadFilter;

function eventIdsFlag(flags: ParsedFlags): string[] {
  const v = flags['event-id'];
  const raws = v === undefined ? [] : Array.isArray(v) ? v : [String(v)];
  const out: string[] = [];
  for (const raw of raws) {
    for (const id of raw.split(',').map((s) => s.trim())) {
      if (!EVENT_ID_RE.test(id))
        throw invalid('event-id', raw, 'event ids (UUIDs), comma-separated or repeated');
      if (!out.includes(id)) out.push(id);
    }
  }
  return out;
}

/** DEAD rows in event_id order (UUIDv7: creation order), keyset-paginated. */
export function listDead(
  ds: DataSource,
  filter: Filter,
  limit: number,
  afterId?: string,
): Promise<DeadEvent[]> {
  return new TypeOrmDeadLetterReader(ds).list(filter, limit, afterId);
}

function oneLine(text: string | null, max: number): string {
  if (text === null) return '-';
  const flat = text.replace(/\s+/g, ' ');
  return flat.length > max ? `${flat.slice(0, max - 3)}...` : flat;
}

function deadTable(events: readonly DeadEvent[]): string {
  return renderTable(
    ['event_id', 'topic', 'aggregate', 'event_type', 'attempts', 'age', 'last_error'],
    events.map((e) => [
      e.eventId,
      e.topic,
      e.aggregateType === null ? null : `${e.aggregateType}/${e.aggregateId}@${e.aggregateVersion ?? '-'}`,
      e.eventType,
      e.attempts,
      formatAge(e.ageMs),
      oneLine(e.lastError, 100),
    ]),
  );
}

async function list(io: Io, flags: ParsedFlags, filter: Filter): Promise<number> {
  const limit = intFlag(flags, 'limit', { min: 1, max: 100_000 }) ?? 100;
  const target = resolveDbTarget(flags, io.env);
  const { total, events } = await withDatabase(target, async (ds) => ({
    total: await new TypeOrmDeadLetterReader(ds).count(filter),
    events: await listDead(ds, filter, limit),
  }));
  if (boolFlag(flags, 'json')) {
    printJson(io, { total, shown: events.length, events });
    return 0;
  }
  if (total === 0) {
    io.stdout.write('No DEAD outbox events.\n');
    return 0;
  }
  io.stdout.write(deadTable(events));
  io.stdout.write(
    `${total} DEAD event${total === 1 ? '' : 's'}` +
      (events.length < total ? ` (${events.length} shown; --limit for more)` : '') +
      '. Replay: rocketmq-tx dead-letter replay --event-id <id> | --all\n',
  );
  return 0;
}

interface ReplayReport {
  dryRun: boolean;
  /** Rows that were DEAD and matched (dry run: would be replayed). */
  matched: number;
  replayed: number;
  /** --event-id values that were not DEAD: their current status, or "missing". */
  notDead: Array<{ eventId: string; status: string }>;
  events?: DeadEvent[];
}

async function replay(io: Io, flags: ParsedFlags, filter: Filter): Promise<number> {
  const all = boolFlag(flags, 'all');
  if (!all && filter.eventIds.length === 0) {
    throw new UsageError('dead-letter replay needs --event-id <id> (repeatable) or --all');
  }
  if (all && filter.eventIds.length > 0) {
    throw new UsageError('dead-letter replay takes --event-id or --all, not both');
  }
  const dryRun = boolFlag(flags, 'dry-run');
  const json = boolFlag(flags, 'json');
  const target = resolveDbTarget(flags, io.env);
  const report = await withDatabase(target, async (ds) => {
    const store = new TypeOrmOutboxStore(ds);
    const r: ReplayReport = { dryRun, matched: 0, replayed: 0, notDead: [] };
    const shown: DeadEvent[] = [];
    let after: string | undefined;
    // Bounded batches in event_id order; replayed rows become NEW, so a dry run pages with a cursor.
    for (;;) {
      const batch = await listDead(ds, filter, BATCH, after);
      if (batch.length === 0) break;
      r.matched += batch.length;
      if (shown.length < 1000) shown.push(...batch.slice(0, 1000 - shown.length));
      if (!dryRun) r.replayed += await store.replayDead(batch.map((e) => e.eventId));
      after = batch[batch.length - 1]!.eventId;
      if (r.matched >= BATCH) {
        note(
          io,
          `dead-letter replay: ${dryRun ? 'matched' : 'replayed'} ${dryRun ? r.matched : r.replayed} so far`,
        );
      }
      if (batch.length < BATCH) break;
    }
    if (filter.eventIds.length > 0) {
      const found = new Set(shown.map((e) => e.eventId));
      const rest = filter.eventIds.filter((id) => !found.has(id));
      if (rest.length > 0) {
        const status = await new TypeOrmDeadLetterReader(ds).statusOf(rest);
        r.notDead = rest.map((eventId) => ({ eventId, status: status.get(eventId) ?? 'missing' }));
      }
    }
    r.events = shown;
    return r;
  });
  if (json) {
    printJson(io, report);
  } else {
    if (report.events && report.events.length > 0) io.stdout.write(deadTable(report.events));
    io.stdout.write(
      dryRun
        ? `Dry run: ${report.matched} DEAD event${report.matched === 1 ? '' : 's'} would be replayed (nothing changed).\n`
        : `Replayed ${report.replayed} DEAD event${report.replayed === 1 ? '' : 's'} to NEW (attempts reset); ` +
            'a running relay delivers them.\n',
    );
    for (const n of report.notDead) {
      io.stdout.write(
        `Not replayed: ${n.eventId} is ${n.status === 'missing' ? 'not in outbox_event' : n.status}\n`,
      );
    }
  }
  // A named event that was not DEAD is a failed request (a typo, or replayed meanwhile): exit 1.
  return report.notDead.length > 0 ? 1 : 0;
}

export const deadLetterCommand: Command = {
  name: 'dead-letter',
  usage: 'rocketmq-tx dead-letter list|replay [flags]',
  description:
    'list:   DEAD outbox_event rows (never delivered after --max-attempts) with attempts and last_error.\n' +
    'replay: set DEAD rows back to NEW with attempts reset, so the relay sends them again (same\n' +
    '        eventId): the given --event-id values, or --all (of --topic). --dry-run changes nothing.',
  flags: deadLetterFlags,
  maxPositionals: 1,
  async run(parsed, ctx) {
    const sub = parsed.positionals[0];
    const filter: Filter = {
      topics: topicsFlag(parsed.flags, 'topic'),
      eventIds: eventIdsFlag(parsed.flags),
    };
    if (sub === 'list') {
      for (const f of ['all', 'dry-run'] as const) {
        if (boolFlag(parsed.flags, f)) throw new UsageError(`--${f} belongs to dead-letter replay, not list`);
      }
      return list(ctx.io, parsed.flags, filter);
    }
    if (sub === 'replay') {
      if (parsed.flags.limit !== undefined)
        throw new UsageError('--limit belongs to dead-letter list, not replay');
      return replay(ctx.io, parsed.flags, filter);
    }
    throw new UsageError(
      sub === undefined
        ? 'dead-letter needs a subcommand: list or replay'
        : `unknown dead-letter subcommand ${JSON.stringify(sub)}: expected list or replay`,
    );
  },
};
