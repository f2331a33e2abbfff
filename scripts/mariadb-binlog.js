#!/usr/bin/env node
'use strict';
/**
 * A MariaDB server with the binlog on (ROW format, a server id) for `rocketmq-tx cdc`: its tests,
 * the CDC demo and .ci/run. The machine's own server usually runs without a binlog; this one runs
 * from the same MariaDB binaries on its own port and data directory:
 *
 *   node scripts/mariadb-binlog.js start|stop|status
 *
 * Port ROCKETMQ_TX_BINLOG_PORT (default 3307), data in ROCKETMQ_TX_BINLOG_HOME (default
 * .mariadb-binlog/), root without a password on 127.0.0.1, database `test`.
 *
 * The server reports the version string 5.7.19-MariaDB-<real version>: Debezium's MySQL
 * connector (the one Maven Central serves here; the MariaDB connector is not) asks a server whose
 * version is 8.4 or later for SHOW BINARY LOG STATUS and the MySQL JDBC driver asks one from
 * 5.7.20 on for @@transaction_isolation, neither of which MariaDB 10.x has. Nothing else changes:
 * the binlog and the SQL are MariaDB's. A MySQL server needs none of this (docs/cdc.md).
 */
const fs = require('node:fs');
const path = require('node:path');
const childProcess = require('node:child_process');
const proc = require('./lib/proc');
const { printStatus, runCli } = require('./lib/localServer');

const PORT = Number(process.env.ROCKETMQ_TX_BINLOG_PORT || 3307);
const HOME = path.resolve(
  process.env.ROCKETMQ_TX_BINLOG_HOME || path.join(__dirname, '..', '.mariadb-binlog'),
);
const DATA = path.join(HOME, 'data');
const PID_FILE = path.join(HOME, 'mariadbd.pid');
const URL = `mysql://root@127.0.0.1:${PORT}/test`;

function binary(names) {
  for (const n of names) {
    const found =
      proc.which(n) ||
      ['/usr/sbin', '/usr/local/sbin', '/usr/bin'].map((d) => path.join(d, n)).find(fs.existsSync);
    if (found) return found;
  }
  throw new Error(`none of ${names.join(', ')} found: install the MariaDB server package (mariadb-server)`);
}

function realVersion(mariadbd) {
  const out = childProcess.execFileSync(mariadbd, ['--version'], { encoding: 'utf8' });
  const m = /Ver\s+(\d+\.\d+\.\d+)/.exec(out);
  return m ? m[1] : 'unknown';
}

function query(sql) {
  const client = binary(['mariadb', 'mysql']);
  return childProcess.execFileSync(client, ['-uroot', '-h127.0.0.1', `-P${PORT}`, '-N', '-e', sql], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

async function start({ quiet = false } = {}) {
  const log = quiet ? () => {} : (l) => console.log(`[mariadb-binlog] ${l}`);
  const pid = proc.readPidFile(PID_FILE);
  if (pid && proc.isAlive(pid) && (await proc.portOpen(PORT))) {
    log(`already running (pid ${pid}) at ${URL}`);
    return { url: URL, port: PORT, pid };
  }
  if (await proc.portOpen(PORT)) {
    throw new Error(`port ${PORT} is taken by another process: set ROCKETMQ_TX_BINLOG_PORT`);
  }
  const mariadbd = binary(['mariadbd', 'mysqld']);
  const t0 = Date.now();
  fs.mkdirSync(HOME, { recursive: true });
  if (!fs.existsSync(path.join(DATA, 'mysql'))) {
    log(`initializing ${DATA}`);
    const install = binary(['mariadb-install-db', 'mysql_install_db']);
    const res = await proc.run(install, [
      '--no-defaults',
      `--user=${process.env.USER || 'root'}`,
      `--datadir=${DATA}`,
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
    ]);
    if (res.code !== 0) throw new Error(`${install} failed (exit ${res.code}):\n${res.stderr || res.stdout}`);
  }
  const args = [
    '--no-defaults',
    `--user=${process.env.USER || 'root'}`,
    `--datadir=${DATA}`,
    `--port=${PORT}`,
    '--bind-address=127.0.0.1',
    `--socket=${path.join(HOME, 'mariadbd.sock')}`,
    `--pid-file=${PID_FILE}`,
    `--log-error=${path.join(HOME, 'error.log')}`,
    `--log-bin=${path.join(DATA, 'binlog')}`,
    '--binlog-format=ROW',
    '--server-id=1',
    // Seven days of binlog: a stopped CDC engine resumes within that (docs/cdc.md).
    '--expire-logs-days=7',
    '--innodb-buffer-pool-size=64M',
    '--skip-name-resolve',
    `--version=5.7.19-MariaDB-${realVersion(mariadbd)}-binlog`,
  ];
  const child = childProcess.spawn(mariadbd, args, { detached: true, stdio: 'ignore' });
  child.unref();
  await proc.waitUntil(() => proc.portOpen(PORT), {
    timeoutMs: 60_000,
    description: `MariaDB on port ${PORT} (log: ${path.join(HOME, 'error.log')})`,
  });
  query('CREATE DATABASE IF NOT EXISTS test');
  log(`ready in ${((Date.now() - t0) / 1000).toFixed(1)} s (pid ${child.pid}): ${URL}, binlog ROW`);
  return { url: URL, port: PORT, pid: child.pid };
}

async function stop({ quiet = false } = {}) {
  const log = quiet ? () => {} : (l) => console.log(`[mariadb-binlog] ${l}`);
  const pid = proc.readPidFile(PID_FILE);
  if (!pid || !proc.isAlive(pid)) {
    log('not running');
    return;
  }
  process.kill(pid, 'SIGTERM');
  await proc.waitUntil(() => !proc.isAlive(pid), {
    timeoutMs: 60_000,
    description: `mariadbd ${pid} to exit`,
  });
  log(`stopped (pid ${pid})`);
}

function status() {
  return printStatus('mariadb-binlog', proc.readPidFile(PID_FILE), PORT, URL);
}

module.exports = { start, stop, URL, PORT };

if (require.main === module) runCli('mariadb-binlog', 'mariadb-binlog.js', { start, stop, status });
