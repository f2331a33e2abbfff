#!/usr/bin/env node
'use strict';
/**
 * `npm test`: make sure a broker runs (local one via scripts/rocketmq.js, unless ROCKETMQ_ENDPOINTS
 * names an existing one), check the test database answers, then run the unit, integration and
 * isolated projects, and the contract project on EVERY supported database (MySQL/MariaDB and
 * PostgreSQL, see scripts/test-contract.js: a database that does not answer fails the run).
 * Extra CLI args go to jest (`npm test -- --selectProjects unit`). Leaves the broker running.
 */
const path = require('node:path');
const childProcess = require('node:child_process');
const rocketmq = require('./rocketmq');
const { runContract, postgresUrl, maskUrl } = require('./test-contract');
const { jsonOutput, failuresIn } = require('./jest-failures');

/**
 * The suites that run a second time on PostgreSQL with the real broker: producer, check-back and
 * crash windows, relay and discard recovery, consumer, the order-service scenario, the
 * operational suites (status, retention, archive, reconcile, metrics, lean transport, doctor),
 * and publish() in the caller's transaction (publish, publish-crash, publish-transactional), the
 * check-back confirmation, the CLI and the NestJS sample. Not here: least-privilege (MariaDB users;
 * its statements run on PostgreSQL roles in the contract suite); smoke, startup and process-exit
 * touch no database's SQL.
 */
const POSTGRES_COMPONENT_SUITES = [
  'producer',
  'crash',
  'checkback-db-outage',
  'pool-hygiene',
  'forged-properties',
  'outbox',
  'outbox-fallback',
  'relay-discard',
  'discard-recovery',
  'consumer',
  'consumer-crash',
  'order-service',
  'status',
  'retention',
  'archive',
  'reconcile',
  'metrics',
  'lean-transport',
  'doctor',
  'publish',
  'publish-crash',
  'publish-transactional',
  'checkback-confirm',
  'cli',
  'nestjs-order-service',
];

const DEFAULT_DB_URL = 'mysql://root@127.0.0.1:3306/test';

async function checkDatabase(url) {
  if (/^postgres(ql)?:\/\//i.test(url)) {
    const { Client } = require('pg');
    const client = new Client({ connectionString: url, connectionTimeoutMillis: 5000 });
    await client.connect();
    try {
      await client.query('SELECT 1');
    } finally {
      await client.end().catch(() => {});
    }
    return;
  }
  let mysql;
  try {
    mysql = require('mysql2/promise');
  } catch {
    throw new Error('mysql2 is not installed (run `npm ci`)');
  }
  let conn;
  try {
    conn = await mysql.createConnection({ uri: url, connectTimeout: 5000 });
    await conn.query('SELECT 1');
  } finally {
    if (conn) await conn.end().catch(() => {});
  }
}

async function main() {
  const t0 = Date.now();
  await rocketmq.start();

  const dbUrl = process.env.ROCKETMQ_TX_DB_URL || DEFAULT_DB_URL;
  try {
    await checkDatabase(dbUrl);
    console.log(`[test] database ${maskUrl(dbUrl)} answers`);
  } catch (err) {
    console.error(
      `[test] the test database ${maskUrl(dbUrl)} is not reachable: ${err.message}\n` +
        '       Start MySQL/MariaDB (e.g. `docker compose -f docker/docker-compose.yml up -d mysql`) ' +
        'or set ROCKETMQ_TX_DB_URL=mysql://user:pass@host:3306/db (or postgres://user@host:5432/db).',
    );
    return 1;
  }

  const jestBin = require.resolve('jest/bin/jest');
  const extra = process.argv.slice(2);
  /** Failed tests per step, from each run's JSON results (printed in the summary). */
  const failed = new Map();
  /** Seconds each step took (printed in the summary, to keep CI inside its budget). */
  const seconds = new Map();
  const timed = (step, run) => {
    const started = Date.now();
    const done = (code) => {
      seconds.set(step, (Date.now() - started) / 1000);
      return code;
    };
    const code = run();
    return code instanceof Promise ? code.then(done) : done(code);
  };
  const runJest = (args, env = process.env, step) => {
    console.log(`[test] jest ${args.join(' ')}`);
    const out = step ? jsonOutput(step) : undefined;
    const res = childProcess.spawnSync(process.execPath, [jestBin, ...args, ...(out?.args ?? [])], {
      stdio: 'inherit',
      cwd: path.resolve(__dirname, '..'),
      env,
    });
    if (res.error) throw res.error;
    if (out) failed.set(step, failuresIn(out.file));
    return res.status ?? 1;
  };
  console.log(`[test] services ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  // With arguments, run exactly what was asked; without, everything: the tests that stop or
  // restart the shared broker run alone, after the others.
  if (extra.length > 0) return runJest(['--maxWorkers=2', ...extra]);
  const STEPS = {
    main: 'unit + integration (MariaDB)',
    isolated: 'isolated (MariaDB)',
    contract: 'store contract (MariaDB, PostgreSQL)',
    postgres: 'component suites (PostgreSQL, official transport)',
    kills: 'producer kills (PostgreSQL)',
  };
  const main = timed(STEPS.main, () =>
    runJest(
      ['--maxWorkers=2', '--forceExit', '--selectProjects', 'unit', 'integration'],
      process.env,
      STEPS.main,
    ),
  );
  // --forceExit (here and below): after a broker outage the client library's reconnect timers can
  // outlive a failed test; a hang would cost CI its whole budget, a failure is reported either way.
  const isolated = timed(STEPS.isolated, () =>
    runJest(
      ['--runInBand', '--forceExit', '--passWithNoTests', '--selectProjects', 'isolated'],
      process.env,
      STEPS.isolated,
    ),
  );
  // The store contract on every supported database, one after the other (each in band).
  const contract = await timed(STEPS.contract, () =>
    runContract([], (lines) => failed.set(STEPS.contract, lines)),
  );
  // The components again on PostgreSQL (the contract run above checked that it answers), with
  // the producers on the official client (ROCKETMQ_TX_TRANSPORT, test/helpers/env.ts): the
  // default transport is lean, and this keeps `transport: 'official'` under the same suites.
  const pgUrl = postgresUrl();
  const pgTransport = process.env.ROCKETMQ_TX_TRANSPORT || 'official';
  console.log(
    `[test] component suites on PostgreSQL at ${maskUrl(pgUrl)}, producers on transport ${pgTransport}`,
  );
  const postgres = timed(STEPS.postgres, () =>
    runJest(
      [
        '--maxWorkers=2',
        '--forceExit',
        '--selectProjects',
        'integration',
        '--testPathPattern',
        `test/integration/(${POSTGRES_COMPONENT_SUITES.join('|')})\\.test\\.ts$`,
      ],
      { ...process.env, ROCKETMQ_TX_DB_URL: pgUrl, ROCKETMQ_TX_TRANSPORT: pgTransport },
      STEPS.postgres,
    ),
  );
  // The producer-kills scenario on PostgreSQL, short so CI stays bounded: the check-max-5 case only
  // (the shared broker; the check-max-1 broker is not started), with KILL_TEST_KILLS kills (6).
  const kills = timed(STEPS.kills, () =>
    runJest(
      [
        '--runInBand',
        '--forceExit',
        '--selectProjects',
        'isolated',
        '--testPathPattern',
        'test/integration/producer-kills\\.isolated\\.test\\.ts$',
        '--testNamePattern',
        'check max 5',
      ],
      { ...process.env, ROCKETMQ_TX_DB_URL: pgUrl, KILL_TEST_KILLS: process.env.KILL_TEST_PG_KILLS || '6' },
      STEPS.kills,
    ),
  );
  // One line per step at the very end, so a truncated CI log still says which step failed.
  const steps = [
    [STEPS.main, main],
    [STEPS.isolated, isolated],
    [STEPS.contract, contract],
    [STEPS.postgres, postgres],
    [STEPS.kills, kills],
  ];
  console.log(`[test] summary after ${((Date.now() - t0) / 1000).toFixed(0)} s:`);
  for (const [name, code] of steps) {
    const took = seconds.has(name) ? ` (${seconds.get(name).toFixed(0)} s)` : '';
    console.log(`[test]   ${code === 0 ? 'passed' : `FAILED (exit ${code})`}  ${name}${took}`);
    for (const line of failed.get(name) ?? []) console.log(`[test]       ✕ ${line}`);
  }
  return steps.map(([, code]) => code).find((code) => code !== 0) ?? 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(`[test] ${err.message}`);
    process.exitCode = 1;
  },
);
