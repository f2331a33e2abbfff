import type { DataSource } from 'typeorm';
import { readTopicRoutes } from '../broker/topicRoutes';
import { resolveStatusOptions, shapeStatus } from '../observability/status';
import { classifyAny, dialectFor, driverErrorOf } from '../store/typeorm/dialect';
import { doctorQueries } from '../store/typeorm/doctorQueries';
import { readOutboxStatusRows } from '../store/typeorm/statusQueries';
import { tableGrants } from '../store/typeorm/grants';
import {
  adminChecks,
  effectiveSettings,
  groupsToRead,
  readBrokerAdmin,
  type BrokerAdminFacts,
} from './adminChecks';
import { brokerChecks, intendedTypes, optionChecks } from './brokerChecks';
import { codeChecks } from './codeChecks';
import {
  clockCheck,
  inDoubtCheck,
  isolationCheck,
  lockWaitCheck,
  outboxChecks,
  pgLockTimeoutCheck,
  readClock,
  readIsolation,
  readLockWait,
  readOldestSentAgeMs,
  retentionCheck,
} from './databaseChecks';
import { compareGrants, parseGrants, privilegesOn, type ParsedGrant } from './grants';
import { resolveDoctorOptions, type DoctorOptions, type ResolvedDoctorOptions } from './options';
import { buildReport, check, type DoctorCheck, type DoctorGroup, type DoctorReport } from './report';
import { compareSchema, expectedSchema, readSchema } from './schema';

/**
 * Checks a live deployment against the production checklist (docs/doctor.md): the SDK's schema
 * and the user's grants, database settings, the outbox backlog, in-doubt transactions,
 * retention, clock skew, the broker's topics and their message types, and the stated options.
 *
 * Read-only: a handful of short statements (no locks) and one QueryRoute per topic. A check that
 * cannot run is reported (fail or warn, with why), never thrown, so the report can back a
 * readiness probe: `report.status !== 'fail'`.
 *
 * @example
 * const report = await runDoctor({ dataSource, components: ['producer'], transactionTopics: ['orders_tx'],
 *   broker: { endpoints: '127.0.0.1:8081' } });
 * report.exitCode; // 0 all pass, 1 a warning, 2 a failure
 *
 * @throws InvalidOptionError for a bad option (before anything runs).
 */
export async function runDoctor(options?: DoctorOptions): Promise<DoctorReport> {
  let o = resolveDoctorOptions(options);
  if (o.dataSource) dialectFor(o.dataSource);
  const checks: DoctorCheck[] = [];
  // The broker's own settings first: the horizon and lock-wait checks compare with them.
  let admin: { facts: BrokerAdminFacts } | { error: unknown } | undefined;
  if (o.broker?.nameServer) {
    o.onProgress(
      `broker settings via the NameServer ${o.broker.nameServer} (${groupsToRead(o).length} consumer group(s))`,
    );
    try {
      const facts = await readBrokerAdmin(o);
      admin = { facts };
      o = { ...o, ...effectiveSettings(facts) };
    } catch (err) {
      admin = { error: err };
    }
  }
  checks.push(...adminChecks(o, admin));
  if (o.dataSource) {
    checks.push(...(await databaseChecks(o.dataSource, o)));
  } else {
    checks.push(check('schema', 'db.connection', 'skip', 'no database given', { advice: 'pass dataSource' }));
  }
  checks.push(...(await brokerPart(o)));
  o.onProgress('options');
  checks.push(...optionChecks(o), ...codeChecks(o));
  return buildReport(checks);
}

function errorLine(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, i = 0; e !== undefined && e !== null && i < 3; i++) {
    const code = (e as { code?: unknown }).code;
    const msg = e instanceof Error ? e.message : String(e);
    parts.push(typeof code === 'string' && !msg.includes(code) ? `${code}: ${msg}` : msg);
    e = e instanceof Error ? e.cause : undefined;
  }
  // Never a DSN password: mask anything URL-shaped.
  return [...new Set(parts)].join(': ').replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)[^@\s]*@/gi, '$1***@');
}

/** Runs one measurement; a failure becomes a check of the group instead of an exception. */
async function attempt<T>(
  group: DoctorGroup,
  id: string,
  what: string,
  fn: () => Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; check: DoctorCheck }> {
  try {
    return { ok: true, value: await fn() };
  } catch (err) {
    const text = errorLine(err);
    const kind = classifyAny(driverErrorOf(err) ?? err);
    if (kind === 'NO_SUCH_TABLE') {
      return {
        ok: false,
        check: check(group, id, 'skip', `not checked: ${text}`, {
          advice: 'the table is missing (see schema): run the migrations first',
        }),
      };
    }
    const denied = kind === 'ACCESS_DENIED' || /denied/i.test(text);
    return {
      ok: false,
      check: check(group, id, 'warn', `could not read ${what}: ${text}`, {
        advice: denied
          ? 'this user may not read it: run doctor as a user with SELECT on the SDK tables (e.g. the status user)'
          : 'see the error; rerun doctor',
      }),
    };
  }
}

async function databaseChecks(ds: DataSource, o: ResolvedDoctorOptions): Promise<DoctorCheck[]> {
  const out: DoctorCheck[] = [];
  o.onProgress('database: connection');
  if (!ds.isInitialized) {
    return [
      check('schema', 'db.connection', 'fail', 'the DataSource is not initialized', {
        advice: 'call dataSource.initialize() first',
      }),
    ];
  }
  const q = doctorQueries(ds);
  let who: { database: string; account: string };
  try {
    const r = await q.identity(ds);
    if (r.database === null) {
      return [
        check('schema', 'db.connection', 'fail', 'no database selected', {
          advice: 'name the database that holds the SDK tables in the connection URL',
        }),
      ];
    }
    who = { database: r.database, account: r.account };
    out.push(check('schema', 'db.connection', 'pass', `${who.account} on ${r.database} (${r.version})`));
  } catch (err) {
    return [
      check('schema', 'db.connection', 'fail', errorLine(err), {
        advice: 'check the database URL, that the server runs and that the user may log in',
      }),
    ];
  }

  const expected = (await expectedSchema(q.dialect)).filter(
    (t) => t.name !== 'outbox_event_archive' || o.archive !== false,
  );
  o.onProgress('database: grants');
  const shown = await attempt(
    'grants',
    'grants.read',
    q.dialect === 'postgres' ? 'the table privileges' : 'SHOW GRANTS',
    async () => {
      const g = await q.grants(ds, [...expected.map((t) => t.name), o.migrationsTableName ?? 'migrations']);
      if (g.kind === 'show-grants') return parseGrants(g.lines);
      return g.tables.map((t): ParsedGrant => ({
        database: who.database,
        table: t.table,
        privileges: t.privileges,
      }));
    },
  );
  const grants: ParsedGrant[] | undefined = shown.ok ? shown.value : undefined;

  o.onProgress('database: schema');
  const schema = await attempt('schema', 'schema.read', 'information_schema', () =>
    readSchema(
      ds,
      expected.map((t) => t.name),
    ),
  );
  let archive = o.archive === true;
  if (schema.ok) {
    archive ||= schema.value.tables.some((t) => t.t.toLowerCase() === 'outbox_event_archive');
    const used = new Set(o.components.flatMap((c) => Object.keys(tableGrants(c))));
    out.push(
      ...compareSchema(expected, schema.value, {
        visible: (t) => grants === undefined || privilegesOn(grants, who.database, t).size > 0,
        used: (t) => (o.components.length === 0 ? undefined : used.has(t)),
        optional: (t) => t === 'outbox_event_archive' && o.archive !== true,
      }),
    );
  } else out.push(schema.check);

  if (!shown.ok) out.push(shown.check);
  else if (o.components.length === 0) {
    out.push(
      check('grants', 'grants', 'skip', `${who.account}: not compared`, {
        advice: 'name the components this user runs (--component producer,relay) to compare its grants',
      }),
    );
  } else
    out.push(
      ...compareGrants(shown.value, who.database, o.components, {
        archive,
        account: who.account,
        migrationsTableName: o.migrationsTableName,
        dialect: q.dialect,
      }),
    );

  o.onProgress('database: settings');
  const isolation = await attempt('database settings', 'db.isolation', 'the isolation level', () =>
    readIsolation(ds),
  );
  const lockWait = await attempt(
    'database settings',
    'db.lock-wait-timeout',
    q.dialect === 'postgres' ? 'lock_timeout' : 'innodb_lock_wait_timeout',
    () => readLockWait(ds),
  );
  out.push(isolation.ok ? isolationCheck(isolation.value, q.dialect) : isolation.check);
  if (!lockWait.ok) out.push(lockWait.check);
  else if (q.dialect === 'postgres') out.push(pgLockTimeoutCheck(lockWait.value.ms, o));
  else out.push(lockWaitCheck((lockWait.value.ms ?? 0) / 1000, o));

  o.onProgress('database: outbox and in-doubt transactions');
  const status = await attempt('outbox', 'outbox.read', 'outbox_event / tx_record', async () => {
    const filter = resolveStatusOptions({ discardHorizonMs: o.discardHorizonMs });
    const rows = await readOutboxStatusRows(ds, filter);
    return shapeStatus({ txRecords: [], outbox: rows, consumed: [] }, filter, new Date());
  });
  if (status.ok) out.push(...outboxChecks(status.value, o), inDoubtCheck(status.value, o));
  else {
    out.push(status.check, { ...status.check, group: 'in-doubt transactions', id: 'tx.in-doubt' });
  }

  o.onProgress('database: retention');
  const sent = await attempt('retention', 'retention.oldest-sent', 'the oldest SENT row', () =>
    readOldestSentAgeMs(ds),
  );
  out.push(sent.ok ? retentionCheck(sent.value, o) : sent.check);

  o.onProgress('database: clock');
  const clock = await attempt('clock', 'clock.skew', 'the database clock', () => readClock(ds));
  out.push(clock.ok ? clockCheck(clock.value) : clock.check);
  return out;
}

async function brokerPart(o: ResolvedDoctorOptions): Promise<DoctorCheck[]> {
  const intended = intendedTypes(o);
  if (!o.broker) {
    return [
      check('broker', 'broker.connection', 'skip', 'no broker given', { advice: 'pass broker.endpoints' }),
    ];
  }
  if (intended.size === 0) {
    return [
      check('broker', 'broker.connection', 'skip', 'no topics named', {
        advice:
          'name the topics (--transaction-topics, --outbox-topics, --fifo-topics) to check them on the broker',
      }),
    ];
  }
  o.onProgress(`broker: ${intended.size} topic route(s) at ${o.broker.endpoints}`);
  try {
    const routes = await readTopicRoutes(o.broker, [...intended.keys()], o.logger);
    return brokerChecks(o.broker.endpoints, { routes }, intended, o.confirmBy);
  } catch (err) {
    return brokerChecks(o.broker.endpoints, { error: err }, intended);
  }
}
