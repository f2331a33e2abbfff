import { existsSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidOptionError, describeValue } from '../errors';
import { FactReconciler, type FactReconcilerOptions, type ReconcileReport } from '../index';
import {
  boolFlag,
  COMMON_FLAGS,
  dateFlag,
  DB_FLAGS,
  FlagBindings,
  intFlag,
  JSON_FLAG,
  stringFlag,
  UsageError,
  type Command,
} from './args';
import { createDataSource, resolveDbTarget, withConnected } from './connection';
import { CliError, describeError, note, printJson, renderTable, stderrLogger, type Io } from './output';

export const reconcileFlags = {
  ...DB_FLAGS,
  facts: {
    type: 'string',
    value: '<module>',
    description:
      'JS module (path) exporting facts (the fact query), and for --republish buildEvent, producerGroup, topics (required)',
  },
  republish: {
    type: 'boolean',
    description: 'write each missing event as a NEW outbox row (the relay delivers it); default: dry run',
  },
  since: {
    type: 'string',
    value: '<date>',
    description: 'passed to the fact query as its window start (ISO-8601)',
  },
  until: {
    type: 'string',
    value: '<date>',
    description: 'passed to the fact query as its window end (ISO-8601)',
  },
  'no-archive': {
    type: 'boolean',
    description:
      'do not look in outbox_event_archive (default: look when it exists; a user who cannot read it gets an error)',
  },
  'batch-size': { type: 'string', value: '<n>', description: 'facts per page (default 500)' },
  'max-reported': {
    type: 'string',
    value: '<n>',
    description: 'missing facts listed (all are counted; default 1000)',
  },
  ...JSON_FLAG,
  ...COMMON_FLAGS,
} as const satisfies Command['flags'];

const MODULE_EXPORTS = ['facts', 'buildEvent', 'producerGroup', 'topics'] as const;

type FactModule = Pick<FactReconcilerOptions, 'facts' | 'buildEvent' | 'producerGroup' | 'topics'>;

/** Loads the user's module: CommonJS (or TypeScript under a require hook) first, ESM via import(). */
async function loadFactModule(raw: string): Promise<{ path: string; exports: FactModule }> {
  const path = isAbsolute(raw) ? raw : resolve(process.cwd(), raw);
  if (!existsSync(path))
    throw new UsageError(`invalid --facts ${JSON.stringify(raw)}: no such file (${path})`);
  let loaded: unknown;
  try {
    // A user's module path known only at run time: require, so CommonJS and require hooks work.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    loaded = require(path);
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ERR_REQUIRE_ESM') {
      throw new CliError(`could not load the --facts module ${path}: ${describeError(err)}`, err);
    }
    try {
      // A real import() (tsc would turn a literal one into require): ESM modules load only this way.
      const importEsm = new Function('url', 'return import(url)') as (url: string) => Promise<unknown>;
      loaded = await importEsm(pathToFileURL(path).href);
    } catch (esmErr) {
      throw new CliError(`could not load the --facts module ${path}: ${describeError(esmErr)}`, esmErr);
    }
  }
  let mod = loaded as Record<string, unknown> | undefined;
  // module.exports = { facts }, export const facts, export default { facts }, or a default function.
  if (mod && typeof mod.facts !== 'function' && mod.default !== undefined) {
    const d = mod.default;
    mod = typeof d === 'function' ? { facts: d } : (d as Record<string, unknown>);
  }
  if (typeof loaded === 'function') mod = { facts: loaded };
  if (!mod || typeof mod.facts !== 'function') {
    throw new UsageError(
      `invalid --facts module ${path}: it must export facts, an async function ({ cursor, limit, since, until, dataSource }) => { facts, nextCursor }`,
    );
  }
  const exports: Record<string, unknown> = {};
  for (const k of MODULE_EXPORTS) if (mod[k] !== undefined) exports[k] = mod[k];
  return { path, exports: exports as unknown as FactModule };
}

function missingTable(report: ReconcileReport, limit: number): string {
  return renderTable(
    ['aggregate_type', 'aggregate_id', 'event_type', 'version', 'outcome', 'event_id'],
    report.missing
      .slice(0, limit)
      .map((m) => [
        m.fact.aggregateType,
        m.fact.aggregateId,
        m.fact.eventType,
        m.fact.aggregateVersion ?? null,
        m.outcome,
        m.eventId ?? null,
      ]),
  );
}

function printReport(io: Io, r: ReconcileReport): void {
  io.stdout.write(
    renderTable(
      ['facts', 'count'],
      [
        ['checked', r.checked],
        ['ok (SENT)', r.ok],
        ['pending delivery', r.pendingDelivery],
        ['dead', r.dead],
        ['missing', r.missingCount],
        ['republished', r.republished],
        ['refused (written meanwhile)', r.refused],
      ],
    ),
  );
  if (r.missing.length > 0) {
    const shown = Math.min(50, r.missing.length);
    io.stdout.write(
      `\nMissing facts${r.missingCount > shown ? ` (first ${shown} of ${r.missingCount}; --json for more)` : ''}:\n`,
    );
    io.stdout.write(missingTable(r, shown));
  }
  if (r.deadEventIds.length > 0) {
    io.stdout.write(
      `\nDEAD events of facts: rocketmq-tx dead-letter replay --event-id ${r.deadEventIds.slice(0, 5).join(',')}${r.deadEventIds.length > 5 ? ',...' : ''}\n`,
    );
  }
  io.stdout.write(
    r.dryRun
      ? `\nDry run in ${r.durationMs} ms: nothing written${r.missingCount > 0 ? '; --republish writes the missing events' : ''}.\n`
      : `\n${r.republished} missing event${r.republished === 1 ? '' : 's'} written as NEW outbox rows in ${r.durationMs} ms; a running relay delivers them.\n`,
  );
}

export const reconcileCommand: Command = {
  name: 'reconcile',
  usage: 'rocketmq-tx reconcile --facts <module> [--republish] [flags]',
  description:
    "Runs FactReconciler: pages through your facts (the --facts module's `facts` export, keyset-\n" +
    'paginated) and reports, per fact, whether its event was delivered (SENT, live or archived), is\n' +
    'pending (NEW/IN_FLIGHT), DEAD, or missing. A dry run by default; --republish writes each missing\n' +
    "event (built by the module's `buildEvent`, owned by its `producerGroup`, on its `topics`) as a NEW\n" +
    'outbox row that the relay delivers. The module: module.exports = { facts, buildEvent?,\n' +
    'producerGroup?, topics? } (or ESM named / default exports); TypeScript needs a require hook.',
  flags: reconcileFlags,
  async run(parsed, { io }) {
    const f = parsed.flags;
    const factsPath = stringFlag(f, 'facts');
    if (factsPath === undefined)
      throw new UsageError('--facts <module> is required: the module exporting your fact query');
    const republish = boolFlag(f, 'republish');
    const since = dateFlag(f, 'since');
    const until = dateFlag(f, 'until');
    const b = new FlagBindings();
    const batchSize = intFlag(f, 'batch-size');
    const maxReported = intFlag(f, 'max-reported');
    b.bind('batchSize', 'batch-size', stringFlag(f, 'batch-size'));
    b.bind('maxReportedMissing', 'max-reported', stringFlag(f, 'max-reported'));
    b.bind('since', 'since', stringFlag(f, 'since'));
    b.bind('until', 'until', stringFlag(f, 'until'));
    const target = resolveDbTarget(f, io.env);
    const { path, exports } = await loadFactModule(factsPath);
    if (republish && exports.buildEvent === undefined) {
      throw new UsageError(
        `--republish needs the --facts module ${path} to export buildEvent (with producerGroup and topics)`,
      );
    }
    const json = boolFlag(f, 'json');
    const logger = stderrLogger(io, boolFlag(f, 'verbose'));
    const dataSource = createDataSource(target);
    let reconciler: FactReconciler;
    try {
      reconciler = new FactReconciler({
        ...exports,
        dataSource,
        logger,
        ...(boolFlag(f, 'no-archive') ? { includeArchive: false } : {}),
        ...(batchSize !== undefined ? { batchSize } : {}),
        ...(maxReported !== undefined ? { maxReportedMissing: maxReported } : {}),
        ...(since ? { since } : {}),
        ...(until ? { until } : {}),
      });
    } catch (err) {
      const flagErr = b.translate(err);
      if (flagErr) throw flagErr;
      if (
        err instanceof InvalidOptionError &&
        (MODULE_EXPORTS as readonly string[]).includes(err.option.replace(/\[\d+\]$/, ''))
      ) {
        throw new UsageError(
          `invalid --facts module ${path}: export ${err.option}: got ${describeValue(err.value)}; expected ${err.allowed}`,
        );
      }
      throw err;
    }
    return withConnected(target, dataSource, async () => {
      let lastAt = Date.now();
      const report = await reconciler.run({
        dryRun: !republish,
        onProgress(p) {
          if (Date.now() - lastAt < 1000) return;
          lastAt = Date.now();
          note(
            io,
            `reconcile: page ${p.pages}, checked ${p.checked}, ok ${p.ok}, pending ${p.pendingDelivery}, ` +
              `dead ${p.dead}, missing ${p.missing}${republish ? `, republished ${p.republished}` : ''}`,
          );
        },
      });
      if (json) printJson(io, report);
      else printReport(io, report);
      return 0;
    });
  },
};
