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
  topicsFlag,
  type Command,
} from './args';
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
  ...JSON_FLAG,
  ...COMMON_FLAGS,
} as const satisfies Command['flags'];

function outboxRow(name: string, c: OutboxStatusCounts) {
  return [
    name,
    c.byStatus.NEW,
    c.byStatus.IN_FLIGHT,
    c.byStatus.SENT,
    c.byStatus.DEAD,
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
      ['topic', 'NEW', 'IN_FLIGHT', 'SENT', 'DEAD', 'total', 'oldest undelivered'],
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
    const report = await withDatabase(target, (ds) =>
      collectStatus(ds, options).catch((err: unknown) => Promise.reject(bindings.translate(err) ?? err)),
    );
    if (boolFlag(parsed.flags, 'json')) printJson(io, report);
    else io.stdout.write(renderStatus(report));
    return 0;
  },
};
