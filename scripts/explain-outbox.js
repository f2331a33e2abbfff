#!/usr/bin/env node
/**
 * EXPLAIN of every hot outbox query at ~1M rows (not part of CI: it takes minutes).
 *
 *   npm run explain:outbox                        # 1,000,000 outbox_event rows
 *   npm run explain:outbox -- --rows 200000       # smaller
 *   ROCKETMQ_TX_DB_URL=mysql://root@host:3306/test npm run explain:outbox
 *
 * Creates a scratch database next to the one in ROCKETMQ_TX_DB_URL, runs the SDK migrations
 * (and the opt-in archive migration) there, bulk-loads outbox_event / tx_record / consumed_event
 * with INSERT ... SELECT from MariaDB's sequence engine, then drives the real SDK code (relay
 * store, discard reconciliation, Retention plan/purge/archive, FactReconciler) with a TypeORM
 * logger that records each statement it sends. Each recorded statement is then EXPLAINed and,
 * inside BEGIN ... ROLLBACK, run under ANALYZE FORMAT=JSON for the rows it really examined.
 * The SQL is the code's own, not a copy; only the "before" rows at the end are the pre-fix forms.
 * The scratch database is dropped at the end (also on failure).
 */
'use strict';

require('ts-node').register({
  transpileOnly: true,
  project: require('node:path').join(__dirname, '..', 'tsconfig.json'),
});
require('reflect-metadata');
const { URL } = require('node:url');
const { DataSource } = require('typeorm');
const sdk = require('../src');

const DB_URL = process.env.ROCKETMQ_TX_DB_URL || 'mysql://root@127.0.0.1:3306/test';
const argRows = process.argv.indexOf('--rows');
const ROWS = argRows > 0 ? Number(process.argv[argRows + 1]) : 1_000_000;
const SCRATCH = `rmqtx_scratch_explain_${process.pid}`;
const CHUNK = 50_000;
const DAY_MS = 24 * 3600 * 1000;
const SPAN_MS = 30 * DAY_MS; // rows are spread over the last 30 days

function urlFor(database) {
  const u = new URL(DB_URL);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Records every statement TypeORM sends, under the label of the step that sent it. */
class RecordingLogger {
  constructor() {
    this.label = null;
    this.statements = [];
  }
  logQuery(query, parameters) {
    if (!this.label) return;
    if (/^(START TRANSACTION|BEGIN|COMMIT|ROLLBACK|SELECT VERSION|SET )/i.test(query.trim())) return;
    this.statements.push({ label: this.label, sql: query, params: parameters ?? [] });
  }
  logQueryError() {}
  logQuerySlow() {}
  logSchemaBuild() {}
  logMigration() {}
  log() {}
}

// uuid-shaped, time-ordered ids like UUIDv7 (12 hex digits of ms first), unique by seq.
const uuidSql = (ms, seq) =>
  `LOWER(CONCAT(SUBSTR(LPAD(HEX(${ms}),12,'0'),1,8),'-',SUBSTR(LPAD(HEX(${ms}),12,'0'),9,4),'-7',` +
  `LPAD(HEX(${seq} % 4096),3,'0'),'-8',LPAD(HEX((${seq} DIV 4096) % 4096),3,'0'),'-',LPAD(HEX(${seq}),12,'0')))`;

async function load(ds) {
  const started = Date.now();
  const nowMs = Date.now();
  const step = SPAN_MS / ROWS;
  for (let from = 1; from <= ROWS; from += CHUNK) {
    const to = Math.min(ROWS, from + CHUNK - 1);
    // Event seq s: created at now - (ROWS - s) * step; two events per transaction (tx seq = s DIV 2)
    // and per aggregate (versions 1, 2); status by s % 200: 0-1 NEW, 2-4 IN_FLIGHT, 5 DEAD, else SENT.
    const created = `(${nowMs} - (${ROWS} - seq) * ${step})`;
    const at = `FROM_UNIXTIME(${created} / 1000)`;
    await ds.query(
      `INSERT INTO outbox_event (event_id, tx_id, topic, tag, \`keys\`, properties, aggregate_type, aggregate_id,
         aggregate_version, event_type, event_version, payload, occurred_at, trace_id, status, attempts,
         next_attempt_at, lease_until, lease_owner, published_at, last_error)
       SELECT ${uuidSql(`FLOOR(${created})`, 'seq')}, ${uuidSql(`FLOOR(${created})`, 'seq DIV 2')},
         IF(seq % 5 = 0, 'orders_tx', 'orders'), NULL, '[]', '{}', 'Order', CONCAT('o-', seq DIV 2),
         1 + seq % 2, IF(seq % 2 = 0, 'OrderPlaced', 'OrderPaid'), 1,
         CONCAT('{"orderId":"o-', seq DIV 2, '","lines":[', REPEAT('{"sku":"x","qty":1},', 6), '{}]}'),
         ${at}, NULL,
         CASE WHEN seq % 200 < 2 THEN 'NEW' WHEN seq % 200 < 5 THEN 'IN_FLIGHT' WHEN seq % 200 = 5 THEN 'DEAD' ELSE 'SENT' END,
         IF(seq % 200 = 5, 10, 0),
         IF(seq % 200 = 1, ${at} + INTERVAL 1 HOUR, ${at}), NULL, NULL,
         IF(seq % 200 < 6, NULL, ${at} + INTERVAL 0.05 SECOND),
         IF(seq % 200 = 5, 'Error: broker said no', NULL)
       FROM seq_${from}_to_${to}`,
    );
    await ds.query(
      `INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count, created_at, confirmed_at)
       SELECT ${uuidSql(`FLOOR(${created})`, 'seq DIV 2')}, 'COMMITTED', 'PRODUCER', 'orders', 'orders', 2, ${at},
              IF(seq % 200 < 6, NULL, ${at} + INTERVAL 0.05 SECOND)
       FROM seq_${from}_to_${to} WHERE seq % 2 = 0`,
    );
    await ds.query(
      `INSERT INTO consumed_event (consumer_group, event_id, event_type, aggregate_type, aggregate_id,
         aggregate_version, outcome, consumed_at)
       SELECT 'inventory', ${uuidSql(`FLOOR(${created})`, 'seq')}, 'OrderPlaced', 'Order', CONCAT('o-', seq DIV 2),
              1, 'APPLIED', ${at} + INTERVAL 1 SECOND
       FROM seq_${from}_to_${to} WHERE seq % 2 = 0`,
    );
    process.stdout.write(`\r  loaded ${to.toLocaleString('en-US')} / ${ROWS.toLocaleString('en-US')} events`);
  }
  // Rolled-back transactions leave a tombstone and no event.
  await ds.query(
    `INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count, created_at)
     SELECT ${uuidSql(`FLOOR(${nowMs} - seq * 500000)`, `${ROWS} + seq`)}, 'ROLLED_BACK', 'CHECK_BACK', 'orders',
            'orders', 1, FROM_UNIXTIME((${nowMs} - seq * 500000) / 1000)
     FROM seq_1_to_${Math.max(1, Math.floor(ROWS / 200))}`,
  );
  for (const t of ['outbox_event', 'tx_record', 'consumed_event']) await ds.query(`ANALYZE TABLE ${t}`);
  const loadMs = Date.now() - started;
  const counts = await ds.query(
    `SELECT status, COUNT(*) AS n FROM outbox_event GROUP BY status ORDER BY status`,
  );
  const tx = await ds.query('SELECT COUNT(*) AS n FROM tx_record');
  const consumed = await ds.query('SELECT COUNT(*) AS n FROM consumed_event');
  process.stdout.write('\n');
  return { loadMs, counts, txRecords: Number(tx[0].n), consumed: Number(consumed[0].n) };
}

/** Drives the SDK's own code; the logger records what it sends, step by step. */
async function drive(ds, logger) {
  const step = async (label, fn) => {
    logger.label = label;
    try {
      await fn();
    } finally {
      logger.label = null;
    }
  };
  const store = new sdk.TypeOrmOutboxStore(ds);
  const topics = ['orders', 'orders_tx'];
  const sample = await ds.query(
    `SELECT event_id, status FROM outbox_event WHERE status IN ('NEW', 'DEAD', 'IN_FLIGHT') ORDER BY event_id LIMIT 300`,
  );
  const ids = (status) => sample.filter((r) => r.status === status).map((r) => r.event_id);
  await step('relay claim', () => store.claim({ limit: 100, leaseMs: 30_000, owner: 'explain', topics }));
  await step('relay markSent', () => store.markSent(ids('NEW')[0], 'explain'));
  await step('relay markFailed', () => store.markFailed(ids('NEW')[1], 'explain', 'Error: x', 1000, false));
  await step('producer markConfirmed', () => store.markConfirmed(ids('IN_FLIGHT').slice(0, 50)));
  await step('discard reconciliation', () => store.promoteUnconfirmed(20 * 60_000, 100, topics));
  await step('replayDead(ids)', () => store.replayDead(ids('DEAD').slice(0, 20)));
  // replayDead() of every DEAD row would change them all: record its statement without running it.
  const recordOnly = {
    options: { type: 'mysql' },
    query: async (sql, params) => {
      logger.statements.push({ label: 'replayDead(all)', sql, params: params ?? [] });
      return { affectedRows: 0 };
    },
  };
  await new sdk.TypeOrmOutboxStore(recordOnly).replayDead();
  // Facts: 1,000 aggregates that have events, 200 that do not; two pages.
  // Aggregates of the younger half (retention below removes the oldest rows).
  const facts = [];
  const newest = Math.floor(ROWS / 2) - 1;
  const stride = Math.max(1, Math.floor(ROWS / 4 / 1000));
  for (let i = 0; i < 1000; i++) {
    facts.push({
      aggregateType: 'Order',
      aggregateId: `o-${newest - i * stride}`,
      eventType: 'OrderPlaced',
      aggregateVersion: 1,
    });
  }
  for (let i = 0; i < 200; i++)
    facts.push({ aggregateType: 'Order', aggregateId: `missing-${i}`, eventType: 'OrderPlaced' });
  const reconciler = new sdk.FactReconciler({
    dataSource: ds,
    batchSize: 600,
    facts: async ({ cursor, limit }) => {
      const from = cursor ?? 0;
      const page = facts.slice(from, from + limit);
      return { facts: page, nextCursor: from + limit < facts.length ? from + limit : null };
    },
    buildEvent: (fact) => ({
      topic: 'orders',
      event: sdk.createEnvelope({
        eventType: fact.eventType,
        eventVersion: 1,
        aggregateType: fact.aggregateType,
        aggregateId: fact.aggregateId,
        aggregateVersion: fact.aggregateVersion ?? 1,
        data: {},
      }),
    }),
    producerGroup: 'orders',
    topics: ['orders'],
  });
  let report;
  await step('fact reconcile (republish)', async () => {
    report = await reconciler.run({ dryRun: false });
  });
  const retention = new sdk.Retention({
    dataSource: ds,
    olderThanMs: 20 * DAY_MS,
    consumedEventOlderThanMs: 20 * DAY_MS,
    batchSize: 1000,
    maxBatchesPerTable: 1,
  });
  await step('retention plan', () => retention.plan());
  await step('retention purge', () => retention.purge());
  await step('retention archive', () => retention.archive());
  return report;
}

/** Every object of an ANALYZE FORMAT=JSON tree that describes a table access. */
function tableAccesses(node, out = []) {
  if (Array.isArray(node)) node.forEach((n) => tableAccesses(n, out));
  else if (node && typeof node === 'object') {
    if (typeof node.table_name === 'string' && node.access_type) out.push(node);
    for (const v of Object.values(node)) tableAccesses(v, out);
  }
  return out;
}

function shorten(sql) {
  return sql
    .replace(/\s+/g, ' ')
    .replace(/(\?, ){3,}\?/g, '?, …')
    .replace(/\(\?, \?, \?, .*?\)(, \(\?.*?\))+/g, '(…), …')
    .trim();
}

async function explainAll(ds, statements) {
  const rows = [];
  const seen = new Set();
  for (const s of statements) {
    const key = `${s.label}|${shorten(s.sql)}`;
    if (seen.has(key)) continue;
    seen.add(key);
    if (/information_schema/i.test(s.sql)) continue; // once per run: does the archive table exist?
    if (/^\s*INSERT\b/i.test(s.sql) && !/\bSELECT\b/i.test(s.sql)) {
      rows.push({
        label: s.label,
        sql: shorten(s.sql),
        table: '(insert values)',
        type: '-',
        key: '-',
        rows: '-',
        r_rows: '-',
        extra: 'no read',
      });
      continue;
    }
    const plan = await ds.query(`EXPLAIN ${s.sql}`, s.params);
    let analyzed = [];
    const qr = ds.createQueryRunner();
    await qr.connect();
    try {
      await qr.query('BEGIN');
      const res = await qr.query(`ANALYZE FORMAT=JSON ${s.sql}`, s.params);
      const json = JSON.parse(Object.values(res[0] ?? res)[0]);
      analyzed = tableAccesses(json);
    } catch (err) {
      analyzed = [];
      process.stderr.write(`  (ANALYZE failed for ${s.label}: ${err.message})\n`);
    } finally {
      await qr.query('ROLLBACK').catch(() => undefined);
      await qr.release();
    }
    plan.forEach((p, i) => {
      const a = analyzed.find((x) => x.table_name === p.table) ?? analyzed[i];
      rows.push({
        label: s.label,
        sql: shorten(s.sql),
        table: p.table,
        type: p.type,
        key: p.key ?? '-',
        rows: p.rows ?? '-',
        r_rows: a && a.r_rows !== undefined ? Math.round(a.r_rows * (a.r_loops ?? 1)) : '-',
        extra: p.Extra ?? '',
      });
    });
  }
  return rows;
}

/** The pre-fix forms (Retention before this change), to show what the fixes changed. */
const BEFORE = [
  {
    label: 'BEFORE purge outbox (published_at only)',
    sql: "DELETE FROM outbox_event WHERE status = 'SENT' AND published_at < CURRENT_TIMESTAMP(3) - INTERVAL ? MICROSECOND LIMIT ?",
    params: [20 * DAY_MS * 1000, 1000],
  },
  {
    label: 'BEFORE purge outbox, nothing eligible (end of a run)',
    sql: "DELETE FROM outbox_event WHERE status = 'SENT' AND published_at < CURRENT_TIMESTAMP(3) - INTERVAL ? MICROSECOND LIMIT ?",
    params: [365 * DAY_MS * 1000, 1000],
  },
  {
    after: true,
    label: 'AFTER purge outbox, nothing eligible (end of a run)',
    sql: "DELETE FROM outbox_event WHERE status = 'SENT' AND next_attempt_at < CURRENT_TIMESTAMP(3) - INTERVAL ? MICROSECOND AND published_at < CURRENT_TIMESTAMP(3) - INTERVAL ? MICROSECOND LIMIT ?",
    params: [365 * DAY_MS * 1000, 365 * DAY_MS * 1000, 1000],
  },
  {
    label: 'BEFORE purge tx_record (no created_at index)',
    sql:
      'DELETE FROM tx_record WHERE created_at < CURRENT_TIMESTAMP(3) - INTERVAL ? MICROSECOND' +
      " AND NOT EXISTS (SELECT 1 FROM outbox_event o WHERE o.tx_id = tx_record.tx_id AND o.status <> 'SENT') LIMIT ?",
    params: [20 * DAY_MS * 1000, 1000],
  },
  {
    label: 'BEFORE purge tx_record, nothing eligible',
    sql:
      'DELETE FROM tx_record WHERE created_at < CURRENT_TIMESTAMP(3) - INTERVAL ? MICROSECOND' +
      " AND NOT EXISTS (SELECT 1 FROM outbox_event o WHERE o.tx_id = tx_record.tx_id AND o.status <> 'SENT') LIMIT ?",
    params: [365 * DAY_MS * 1000, 1000],
  },
  {
    after: true,
    label: 'AFTER purge tx_record, nothing eligible',
    sql:
      'DELETE FROM tx_record WHERE created_at < CURRENT_TIMESTAMP(3) - INTERVAL ? MICROSECOND' +
      " AND NOT EXISTS (SELECT 1 FROM outbox_event o WHERE o.tx_id = tx_record.tx_id AND o.status <> 'SENT') LIMIT ?",
    params: [365 * DAY_MS * 1000, 1000],
  },
];

function printTable(rows) {
  const cols = ['label', 'table', 'type', 'key', 'rows', 'r_rows', 'extra'];
  const width = Object.fromEntries(
    cols.map((c) => [c, Math.max(c.length, ...rows.map((r) => String(r[c]).length))]),
  );
  width.extra = Math.min(width.extra, 60);
  const line = (r) =>
    '| ' + cols.map((c) => String(r[c]).slice(0, width[c]).padEnd(width[c])).join(' | ') + ' |';
  console.log(line(Object.fromEntries(cols.map((c) => [c, c]))));
  console.log('|' + cols.map((c) => '-'.repeat(width[c] + 2)).join('|') + '|');
  for (const r of rows) console.log(line(r));
}

async function main() {
  if (!Number.isInteger(ROWS) || ROWS < 1000 || ROWS > 10_000_000) {
    throw new Error(`--rows must be an integer from 1000 to 10000000, got ${process.argv[argRows + 1]}`);
  }
  const admin = new DataSource({ type: 'mysql', url: DB_URL, poolSize: 1 });
  await admin.initialize();
  const logger = new RecordingLogger();
  let ds;
  try {
    await admin.query(`CREATE DATABASE ${SCRATCH}`);
    ds = new DataSource({
      type: 'mysql',
      url: urlFor(SCRATCH),
      entities: [...sdk.rocketMqTxEntities],
      migrations: [...sdk.rocketMqTxMigrations, ...sdk.rocketMqTxArchiveMigrations],
      migrationsTableName: 'rocketmq_tx_migrations',
      poolSize: 4,
      logger,
      logging: ['query'],
    });
    await ds.initialize();
    await ds.runMigrations({ transaction: 'none' });
    const version = (await ds.query('SELECT VERSION() AS v'))[0].v;
    console.log(
      `scratch database ${SCRATCH} on ${version}; loading ${ROWS.toLocaleString('en-US')} outbox_event rows`,
    );
    const loaded = await load(ds);
    console.log(
      `load: ${(loaded.loadMs / 1000).toFixed(1)} s; outbox_event ${loaded.counts
        .map((c) => `${c.status} ${Number(c.n).toLocaleString('en-US')}`)
        .join(
          ', ',
        )}; tx_record ${loaded.txRecords.toLocaleString('en-US')}; consumed_event ${loaded.consumed.toLocaleString('en-US')}`,
    );
    const report = await drive(ds, logger);
    console.log(
      `fact reconcile: checked ${report.checked}, ok ${report.ok}, missing ${report.missingCount}, republished ${report.republished}, ${report.durationMs} ms`,
    );
    const rows = await explainAll(ds, logger.statements);
    // The AFTER forms first; then the BEFORE forms without the index the fix added.
    const before = await explainAll(
      ds,
      BEFORE.filter((b) => b.after),
    );
    await ds.query('ALTER TABLE tx_record DROP INDEX idx_tx_record_created');
    before.unshift(
      ...(await explainAll(
        ds,
        BEFORE.filter((b) => !b.after),
      )),
    );
    console.log(
      "\nHot queries (the SDK's own statements; rows = optimizer estimate, r_rows = rows read, from ANALYZE):\n",
    );
    printTable(rows);
    console.log('\nBefore / after the fixes:\n');
    printTable(before);
    const bad = rows.filter((r) => r.type === 'ALL' || r.type === 'index');
    console.log(
      bad.length === 0
        ? '\nEvery hot query is a range/ref/eq_ref/const read on an index.'
        : `\nNOT index range reads: ${bad.map((r) => `${r.label} (${r.table}: ${r.type})`).join('; ')}`,
    );
    process.exitCode = bad.length === 0 ? 0 : 1;
  } finally {
    await ds?.destroy().catch(() => undefined);
    if (!process.env.KEEP_SCRATCH)
      await admin.query(`DROP DATABASE IF EXISTS ${SCRATCH}`).catch(() => undefined);
    await admin.destroy();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
