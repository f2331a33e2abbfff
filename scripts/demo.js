#!/usr/bin/env node
'use strict';
/**
 * `npm run demo`: checks the database (ROCKETMQ_TX_DB_URL; by default its own database rmqtx_demo
 * on mysql://root@127.0.0.1:3306, created if missing, so the rows the test suite leaves in `test`
 * cannot fail the demo's doctor step),
 * ensures a broker (the local one from Maven jars, unless ROCKETMQ_ENDPOINTS names an existing
 * proxy), then runs samples/order-service/main.ts: migrations, the order scenario, the
 * self-checked summary. Exits with the scenario's code (non-zero when a number is wrong).
 *
 * DEMO_DELIVERY=cdc: the CDC delivery instead (samples/cdc-demo.ts): a binlog-enabled MariaDB
 * (scripts/mariadb-binlog.js, port 3307, unless ROCKETMQ_TX_DB_URL names one), the broker, and
 * `rocketmq-tx cdc` publishing the orders from the binlog.
 */
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { URL } = require('node:url');
const rocketmq = require('./rocketmq');

const DEFAULT_SERVER_URL = 'mysql://root@127.0.0.1:3306/';
const DEFAULT_DATABASE = 'rmqtx_demo';
const DEFAULT_DB_URL = `${DEFAULT_SERVER_URL}${DEFAULT_DATABASE}`;

function maskUrl(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/\/\/([^:/@]+):[^@]*@/, '//$1:***@');
  }
}

/** Resolves when the database answers SELECT 1; rejects with a message that says how to point elsewhere. */
async function checkDatabase(url) {
  if (/^postgres(ql)?:\/\//i.test(url)) {
    const { Client } = require('pg');
    const client = new Client({ connectionString: url, connectionTimeoutMillis: 5000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
    } catch (err) {
      const why = err && err.message ? err.message : String(err);
      throw new Error(
        `cannot reach PostgreSQL at ${maskUrl(url)}: ${why.split(url).join(maskUrl(url))}\n` +
          '  Start one (e.g. `docker compose -f docker/docker-compose.yml up -d postgres`) or point the demo at yours.',
      );
    } finally {
      await client.end().catch(() => {});
    }
    return;
  }
  let mysql;
  try {
    mysql = require('mysql2/promise');
  } catch {
    throw new Error('mysql2 is not installed: run `npm install` first');
  }
  let conn;
  try {
    conn = await mysql.createConnection({ uri: url, connectTimeout: 5000 });
    await conn.query('SELECT 1');
  } catch (err) {
    const why = err && err.message ? err.message : String(err);
    throw new Error(
      `cannot reach MySQL/MariaDB at ${maskUrl(url)}: ${why.split(url).join(maskUrl(url))}\n` +
        '  Start one (e.g. `docker compose -f docker/docker-compose.yml up -d mysql`), or point the demo at yours:\n' +
        '  ROCKETMQ_TX_DB_URL=mysql://user:password@host:3306/database npm run demo (or postgres://user@host:5432/database)',
    );
  } finally {
    if (conn) await conn.end().catch(() => {});
  }
}

/** The default database only: CREATE DATABASE IF NOT EXISTS rmqtx_demo on the default server. */
async function ensureDefaultDatabase() {
  let mysql;
  try {
    mysql = require('mysql2/promise');
  } catch {
    throw new Error('mysql2 is not installed: run `npm install` first');
  }
  await checkDatabase(DEFAULT_SERVER_URL);
  const conn = await mysql.createConnection({ uri: DEFAULT_SERVER_URL, connectTimeout: 5000 });
  try {
    await conn.query(`CREATE DATABASE IF NOT EXISTS \`${DEFAULT_DATABASE}\``);
  } finally {
    await conn.end().catch(() => {});
  }
}

/** Starts the broker, then runs a sample with the broker and database in its environment. */
async function runSample(t0, dbUrl, sample) {
  const broker = await rocketmq.start();
  console.log(`[demo] broker ${broker.endpoints} ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const r = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', sample], {
    stdio: 'inherit',
    env: {
      ...process.env,
      TS_NODE_TRANSPILE_ONLY: '1',
      ROCKETMQ_ENDPOINTS: broker.endpoints,
      ROCKETMQ_TX_DB_URL: dbUrl,
      // The local broker's NameServer: the doctor step and the CDC sink read the broker there.
      ...(broker.namesrvAddr ? { ROCKETMQ_NAMESRV: broker.namesrvAddr } : {}),
    },
  });
  console.log(`[demo] finished in ${((Date.now() - t0) / 1000).toFixed(1)} s (exit ${r.status ?? r.signal})`);
  return r.status ?? 1;
}

async function main() {
  const t0 = Date.now();
  const samples = path.join(__dirname, '..', 'samples');
  const delivery = process.env.DEMO_DELIVERY || 'default';
  if (delivery === 'cdc') {
    const dbUrl = process.env.ROCKETMQ_TX_DB_URL || (await require('./mariadb-binlog').start()).url;
    await checkDatabase(dbUrl);
    console.log(`[demo] binlog database ${maskUrl(dbUrl)} answers`);
    return runSample(t0, dbUrl, path.join(samples, 'cdc-demo.ts'));
  }
  if (delivery !== 'default') throw new Error(`DEMO_DELIVERY=${delivery}: expected cdc or nothing`);
  const dbUrl = process.env.ROCKETMQ_TX_DB_URL || DEFAULT_DB_URL;
  if (!process.env.ROCKETMQ_TX_DB_URL) await ensureDefaultDatabase();
  await checkDatabase(dbUrl);
  console.log(`[demo] database ${maskUrl(dbUrl)} answers`);
  return runSample(t0, dbUrl, path.join(samples, 'order-service', 'main.ts'));
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`[demo] ${err && err.message ? err.message : err}`);
    process.exit(1);
  },
);
