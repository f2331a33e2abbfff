#!/usr/bin/env node
'use strict';
/**
 * The contract suite (test/contract/, the store layer against a real database) on EVERY supported
 * database: MySQL/MariaDB and PostgreSQL. A database that does not answer fails the run with a
 * message saying which and how to start it; it is never skipped.
 *
 * URLs: ROCKETMQ_TX_CONTRACT_MYSQL_URL / ROCKETMQ_TX_CONTRACT_POSTGRES_URL, else ROCKETMQ_TX_DB_URL
 * when it names that database, else the local defaults (mysql://root@127.0.0.1:3306/test,
 * postgres://postgres@127.0.0.1:5432/test). `node scripts/test-contract.js [jest args]`.
 */
const path = require('node:path');
const childProcess = require('node:child_process');
const { jsonOutput, failuresIn } = require('./jest-failures');

const DATABASES = [
  {
    name: 'MySQL/MariaDB',
    schemes: ['mysql', 'mariadb'],
    env: 'ROCKETMQ_TX_CONTRACT_MYSQL_URL',
    defaultUrl: 'mysql://root@127.0.0.1:3306/test',
    hint: 'start MariaDB/MySQL (e.g. `docker compose -f docker/docker-compose.yml up -d mysql`)',
    async check(url) {
      const mysql = require('mysql2/promise');
      const conn = await mysql.createConnection({ uri: url, connectTimeout: 5000 });
      try {
        const [rows] = await conn.query('SELECT VERSION() AS v');
        return rows[0].v;
      } finally {
        await conn.end().catch(() => {});
      }
    },
  },
  {
    name: 'PostgreSQL',
    schemes: ['postgres', 'postgresql'],
    env: 'ROCKETMQ_TX_CONTRACT_POSTGRES_URL',
    defaultUrl: 'postgres://postgres@127.0.0.1:5432/test',
    hint:
      'start PostgreSQL 15+ (e.g. `docker compose -f docker/docker-compose.yml up -d postgres`) ' +
      '(it creates the database test), or create it: `createdb -h 127.0.0.1 -U postgres test`',
    async check(url) {
      const { Client } = require('pg');
      const client = new Client({ connectionString: url, connectionTimeoutMillis: 5000 });
      await client.connect();
      try {
        const res = await client.query('SHOW server_version');
        return `PostgreSQL ${res.rows[0].server_version}`;
      } finally {
        await client.end().catch(() => {});
      }
    },
  },
];

function maskUrl(url) {
  try {
    const u = new (require('node:url').URL)(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@');
  }
}

function schemeOf(url) {
  return /^([a-z0-9+]+):\/\//i.exec(url || '')?.[1]?.toLowerCase();
}

function urlFor(db) {
  if (process.env[db.env]) return process.env[db.env];
  const general = process.env.ROCKETMQ_TX_DB_URL;
  if (general && db.schemes.includes(schemeOf(general))) return general;
  return db.defaultUrl;
}

/**
 * Runs the contract project once per database; resolves with the exit code (0: all passed).
 * `onFailures` receives one line per failed test, prefixed with the database.
 */
async function runContract(extraJestArgs = [], onFailures = () => {}) {
  const failures = [];
  const jestBin = require.resolve('jest/bin/jest');
  const results = [];
  for (const db of DATABASES) {
    const url = urlFor(db);
    let version;
    try {
      version = await db.check(url);
    } catch (err) {
      console.error(
        `\n[contract] FAILED: ${db.name} at ${maskUrl(url)} does not answer: ${err.message}\n` +
          `[contract] The contract suite runs on every supported database and is never skipped: ${db.hint},\n` +
          `[contract] or point ${db.env} at one.\n`,
      );
      results.push({ db, code: 1, why: 'database not reachable' });
      continue;
    }
    console.log(`[contract] ${db.name}: ${version} at ${maskUrl(url)}`);
    const args = ['--selectProjects', 'contract', '--runInBand', ...extraJestArgs];
    console.log(`[contract] jest ${args.join(' ')}`);
    const out = jsonOutput(`contract-${db.schemes[0]}`);
    const res = childProcess.spawnSync(process.execPath, [jestBin, ...args, ...out.args], {
      stdio: 'inherit',
      cwd: path.resolve(__dirname, '..'),
      env: { ...process.env, ROCKETMQ_TX_DB_URL: url },
    });
    if (res.error) throw res.error;
    for (const line of failuresIn(out.file)) failures.push(`[${db.name}] ${line}`);
    results.push({ db, code: res.status ?? 1, why: 'tests failed' });
  }
  for (const r of results) {
    console.log(`[contract] ${r.db.name}: ${r.code === 0 ? 'passed' : `FAILED (${r.why})`}`);
  }
  for (const line of failures) console.log(`[contract]   ✕ ${line}`);
  onFailures(failures);
  return results.every((r) => r.code === 0) ? 0 : 1;
}

/** The PostgreSQL URL the suites use (ROCKETMQ_TX_CONTRACT_POSTGRES_URL, a postgres:// ROCKETMQ_TX_DB_URL, or test). */
function postgresUrl() {
  return urlFor(DATABASES.find((db) => db.name === 'PostgreSQL'));
}

module.exports = { runContract, postgresUrl, maskUrl };

if (require.main === module) {
  runContract(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      console.error(`[contract] ${err.message}`);
      process.exitCode = 1;
    },
  );
}
