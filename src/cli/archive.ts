import { Retention, type RetentionOptions, type RetentionProgress } from '../index';
import {
  boolFlag,
  COMMON_FLAGS,
  DB_FLAGS,
  durationFlag,
  FlagBindings,
  intFlag,
  JSON_FLAG,
  stringFlag,
  UsageError,
  type Command,
} from './args';
import { createDataSource, resolveDbTarget, withConnected } from './connection';
import { note, printJson, renderTable, stderrLogger, type Io } from './output';

const ANY_MS = { minMs: 0, maxMs: Number.MAX_SAFE_INTEGER };

export const archiveFlags = {
  ...DB_FLAGS,
  'older-than': {
    type: 'string',
    value: '<duration>',
    description: 'SENT outbox rows published, and settled tx_records created, before this age (required)',
  },
  'consumed-older-than': {
    type: 'string',
    value: '<duration>',
    description: 'consumed_event rows older than this (default 7d; keep it above the broker retention)',
  },
  'check-back-horizon': {
    type: 'string',
    value: '<duration>',
    description: 'a tx_record younger than this stays: the fence may still be asked (default 30m)',
  },
  'batch-size': {
    type: 'string',
    value: '<n>',
    description: 'rows per short statement or transaction (default 1000)',
  },
  'max-batches': {
    type: 'string',
    value: '<n>',
    description: 'upper bound of batches per table (default 1000)',
  },
  purge: {
    type: 'boolean',
    description: 'delete SENT outbox rows instead of moving them to outbox_event_archive',
  },
  'dry-run': { type: 'boolean', description: 'count what would be archived or deleted, change nothing' },
  ...JSON_FLAG,
  ...COMMON_FLAGS,
} as const satisfies Command['flags'];

/** One progress line per second at most, and one when a table is done. */
function progressPrinter(io: Io) {
  let lastAt = 0;
  let last: RetentionProgress | undefined;
  const print = (p: RetentionProgress) =>
    note(
      io,
      `archive: ${p.table}: ${p.rows} rows ${p.mode === 'archive' && p.table === 'outbox_event' ? 'archived' : 'deleted'} (${p.batches} batch${p.batches === 1 ? '' : 'es'})`,
    );
  return {
    onProgress(p: RetentionProgress) {
      if (last && last.table !== p.table) print(last);
      last = p;
      const now = Date.now();
      if (now - lastAt >= 1000) {
        lastAt = now;
        print(p);
        last = undefined;
      }
    },
    flush() {
      if (last) print(last);
      last = undefined;
    },
  };
}

export const archiveCommand: Command = {
  name: 'archive',
  usage: 'rocketmq-tx archive --older-than <duration> [--purge] [--dry-run] [flags]',
  description:
    'Retention in bounded batches of short statements (Retention.archive / purge / plan): SENT\n' +
    'outbox_event rows published before --older-than move to outbox_event_archive (the\n' +
    'CreateOutboxEventArchive migration), or are deleted with --purge; settled tx_records older than\n' +
    'max(--older-than, --check-back-horizon) with no undelivered event and consumed_event rows older than\n' +
    '--consumed-older-than are deleted. NEW, IN_FLIGHT and DEAD rows are never touched.',
  flags: archiveFlags,
  async run(parsed, { io }) {
    const f = parsed.flags;
    const olderThan = durationFlag(f, 'older-than', ANY_MS);
    if (olderThan === undefined)
      throw new UsageError('--older-than <duration> is required, e.g. --older-than 30d');
    const b = new FlagBindings();
    const options: Omit<RetentionOptions, 'dataSource'> = { olderThanMs: olderThan };
    b.bind('olderThanMs', 'older-than', stringFlag(f, 'older-than'), 'duration');
    const set = (
      option: keyof RetentionOptions,
      flag: string,
      value: number | undefined,
      kind: 'value' | 'duration',
    ) => {
      if (value === undefined) return;
      (options as Record<string, unknown>)[option] = value;
      b.bind(option, flag, stringFlag(f, flag), kind);
    };
    set(
      'consumedEventOlderThanMs',
      'consumed-older-than',
      durationFlag(f, 'consumed-older-than', ANY_MS),
      'duration',
    );
    set(
      'checkBackHorizonMs',
      'check-back-horizon',
      durationFlag(f, 'check-back-horizon', ANY_MS),
      'duration',
    );
    set('batchSize', 'batch-size', intFlag(f, 'batch-size'), 'value');
    set('maxBatchesPerTable', 'max-batches', intFlag(f, 'max-batches'), 'value');
    const mode = boolFlag(f, 'purge') ? 'purge' : 'archive';
    const dryRun = boolFlag(f, 'dry-run');
    const json = boolFlag(f, 'json');
    const target = resolveDbTarget(f, io.env);
    const logger = stderrLogger(io, boolFlag(f, 'verbose'));
    const dataSource = createDataSource(target);
    let retention: Retention;
    try {
      retention = new Retention({ ...options, dataSource, logger });
    } catch (err) {
      throw b.translate(err) ?? err;
    }
    return withConnected(target, dataSource, async () => {
      if (dryRun) {
        const plan = await retention.plan();
        if (json) printJson(io, { mode, dryRun, ...plan });
        else {
          io.stdout.write(
            renderTable(
              ['table', mode === 'archive' ? 'would archive/delete' : 'would delete'],
              [
                ['outbox_event (SENT)', plan.outboxEvents],
                ['tx_record', plan.txRecords],
                ['consumed_event', plan.consumedEvents],
              ],
            ),
          );
          io.stdout.write('Dry run: nothing was changed.\n');
        }
        return 0;
      }
      const progress = progressPrinter(io);
      const report =
        mode === 'archive'
          ? await retention.archive({ onProgress: progress.onProgress })
          : await retention.purge({ onProgress: progress.onProgress });
      progress.flush();
      if (json) printJson(io, { dryRun, ...report });
      else {
        io.stdout.write(
          renderTable(
            ['table', 'rows', 'action'],
            [
              [
                'outbox_event (SENT)',
                report.outboxEvents,
                mode === 'archive' ? 'moved to outbox_event_archive' : 'deleted',
              ],
              ['tx_record', report.txRecords, 'deleted'],
              ['consumed_event', report.consumedEvents, 'deleted'],
            ],
          ),
        );
        io.stdout.write(`${report.batches} batches in ${report.durationMs} ms.\n`);
      }
      return 0;
    });
  },
};
