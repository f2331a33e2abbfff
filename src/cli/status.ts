import {
  collectStatus,
  type InDoubtCounts,
  type OutboxStatusCounts,
  type StatusOptions,
  type StatusReport,
} from '../index';
import {
  boolFlag,
  COMMON_FLAGS,
  DB_FLAGS,
  durationFlag,
  FlagBindings,
  JSON_FLAG,
  stringFlag,
  topicsFlag,
  UsageError,
  type Command,
} from './args';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DataSource } from 'typeorm';
import type { CdcEngineState } from '../cdc/engine';
import { readCdcBacklog } from '../store/typeorm/cdcQueries';
import { resolveDbTarget, withDatabase } from './connection';
import { formatAge, printJson, renderTable } from './output';

export const statusFlags = {
  ...DB_FLAGS,
  topic: {
    type: 'string',
    multiple: true,
    value: '<t1,t2>',
    description: 'only these topics (tx_record and outbox_event)',
  },
  'consumer-group': {
    type: 'string',
    multiple: true,
    value: '<g1,g2>',
    description: 'only these consumer groups (consumed_event)',
  },
  'discard-horizon': {
    type: 'string',
    value: '<duration>',
    description: "the producers' discard horizon: older unconfirmed events count as overdue (default 20m)",
  },
  'cdc-home': {
    type: 'string',
    value: '<dir>',
    description: 'also report the CDC engines of this rocketmq-tx cdc --home (published, restarts, lag)',
  },
  ...JSON_FLAG,
  ...COMMON_FLAGS,
} as const satisfies Command['flags'];

/** A CDC engine as `status --cdc-home` reports it: its last state and the backlog measured now. */
export type CdcStatus = CdcEngineState;

/** The engines' state files in a cdc --home, with the backlog measured on `ds` now. */
async function cdcStatus(ds: DataSource, home: string): Promise<CdcStatus[]> {
  let files: string[];
  try {
    files = readdirSync(home).filter((f) => f.endsWith('.state.json'));
  } catch (err) {
    throw new UsageError(`invalid --cdc-home ${JSON.stringify(home)}: ${(err as Error).message}`);
  }
  const out: CdcStatus[] = [];
  for (const f of files.sort()) {
    const state = JSON.parse(readFileSync(join(home, f), 'utf8')) as CdcEngineState;
    const b = await readCdcBacklog(ds, state.lastEventId ?? null);
    out.push({ ...state, behindEvents: b.events, behindMs: b.ageMs });
  }
  return out;
}

function renderCdc(engines: readonly CdcStatus[]): string {
  if (engines.length === 0) return 'cdc: no engine state in --cdc-home\n';
  return `cdc engines:\n${renderTable(
    ['engine', 'running', 'published', 'behind', 'oldest behind', 'restarts', 'updated', 'last error'],
    engines.map((e) => [
      e.name,
      e.running ? 'yes' : 'no',
      e.published,
      e.behindEvents,
      formatAge(e.behindMs),
      Math.max(0, e.restarts),
      e.updatedAt,
      e.lastError ?? '',
    ]),
  )}`;
}

function outboxRow(name: string, c: OutboxStatusCounts) {
  return [
    name,
    c.byStatus.NEW,
    c.byStatus.IN_FLIGHT,
    c.byStatus.SENT,
    c.byStatus.DEAD,
    c.byStatus.CDC,
    c.total,
    formatAge(c.oldestUndeliveredAgeMs),
  ];
}

/** The report as text tables (the JSON form is collectStatus's report itself). */
export function renderStatus(s: StatusReport): string {
  const out: string[] = [];
  const filter = [
    s.filter.topics ? `topics ${s.filter.topics.join(',')}` : '',
    s.filter.consumerGroups ? `consumer groups ${s.filter.consumerGroups.join(',')}` : '',
  ].filter(Boolean);
  out.push(`rocketmq-tx status at ${s.generatedAt}${filter.length > 0 ? ` (${filter.join('; ')})` : ''}\n`);

  const t = s.txRecords;
  out.push(`tx_record: ${t.total} rows`);
  out.push(
    renderTable(
      ['status', 'by PRODUCER', 'by CHECK_BACK', 'total'],
      (['COMMITTED', 'ROLLED_BACK'] as const).map((st) => [
        st,
        t.byStatusAndResolvedBy[st].PRODUCER,
        t.byStatusAndResolvedBy[st].CHECK_BACK,
        t.byStatus[st],
      ]),
    ),
  );

  const d = s.inDoubt;
  out.push(
    `in doubt (committed, broker commit not confirmed): ${d.transactions} transaction` +
      `${d.transactions === 1 ? '' : 's'}, ${d.events} event${d.events === 1 ? '' : 's'}` +
      (d.oldestAgeMs !== null ? `, oldest ${formatAge(d.oldestAgeMs)}` : ''),
  );
  if (d.events > 0) {
    const states: Array<[string, InDoubtCounts, string]> = [
      [
        'awaiting broker',
        d.byState.awaitingBroker,
        'the broker commits it (or did; confirmation lost in a crash)',
      ],
      ['overdue', d.byState.overdue, 'past the discard horizon, nothing republishes it: act'],
      ['republishing', d.byState.republishing, 'taken by a discard recovery (see attempts, last_error)'],
    ];
    out.push(
      renderTable(
        ['state', 'events', 'transactions', 'oldest', 'meaning'],
        states.map(([name, c, meaning]) => [
          name,
          c.events,
          c.transactions,
          formatAge(c.oldestAgeMs),
          meaning,
        ]),
      ),
    );
  } else {
    out.push('');
  }

  const o = s.outbox;
  out.push(`outbox_event: ${o.total} rows, ${o.undelivered} undelivered, ${o.dead} DEAD`);
  const topics = Object.keys(o.byTopic).sort();
  out.push(
    renderTable(
      ['topic', 'NEW', 'IN_FLIGHT', 'SENT', 'DEAD', 'CDC', 'total', 'oldest undelivered'],
      [...topics.map((name) => outboxRow(name, o.byTopic[name]!)), outboxRow('(all)', o)],
    ),
  );
  if (o.dead > 0) out.push(`${o.dead} DEAD event${o.dead === 1 ? '' : 's'}: rocketmq-tx dead-letter list\n`);

  const c = s.consumedEvents;
  out.push(`consumed_event: ${c.total} rows`);
  const groups = Object.keys(c.byConsumerGroup).sort();
  if (groups.length > 0) {
    out.push(
      renderTable(
        ['consumer group', 'APPLIED', 'STALE', 'IGNORED', 'total'],
        groups.map((g) => {
          const r = c.byConsumerGroup[g]!;
          return [g, r.APPLIED, r.STALE, r.IGNORED, r.total];
        }),
      ),
    );
  }
  return out.join('\n') + (groups.length > 0 ? '' : '\n');
}

export const statusCommand: Command = {
  name: 'status',
  usage: 'rocketmq-tx status [--topic <t>] [--consumer-group <g>] [--discard-horizon <d>] [--json]',
  description:
    'A read-only snapshot (collectStatus): tx_record by status and resolver, in-doubt transactions\n' +
    '(committed, broker commit not yet confirmed) with the oldest age, outbox_event by topic and\n' +
    'status with the oldest undelivered age, DEAD events, consumed_event per consumer group.\n' +
    'Ages are measured on the database clock.',
  flags: statusFlags,
  async run(parsed, { io }) {
    const topics = topicsFlag(parsed.flags, 'topic');
    const groups = topicsFlag(parsed.flags, 'consumer-group', 'group');
    const horizon = durationFlag(parsed.flags, 'discard-horizon', { minMs: 1000, maxMs: 7 * 86_400_000 });
    const options: StatusOptions = {
      ...(topics.length > 0 ? { topics } : {}),
      ...(groups.length > 0 ? { consumerGroups: groups } : {}),
      ...(horizon !== undefined ? { discardHorizonMs: horizon } : {}),
    };
    const bindings = new FlagBindings();
    bindings.bind('topics', 'topic', topics.join(','));
    bindings.bind('consumerGroups', 'consumer-group', groups.join(','));
    const target = resolveDbTarget(parsed.flags, io.env);
    const cdcHome = stringFlag(parsed.flags, 'cdc-home');
    const [report, cdc] = await withDatabase(target, async (ds) => [
      await collectStatus(ds, options).catch((err: unknown) =>
        Promise.reject(bindings.translate(err) ?? err),
      ),
      cdcHome === undefined ? undefined : await cdcStatus(ds, cdcHome),
    ]);
    if (boolFlag(parsed.flags, 'json')) printJson(io, cdc === undefined ? report : { ...report, cdc });
    else io.stdout.write(renderStatus(report) + (cdc === undefined ? '' : `\n${renderCdc(cdc)}`));
    return 0;
  },
};
