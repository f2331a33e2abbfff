#!/usr/bin/env node
'use strict';
/**
 * A PostgreSQL server with logical decoding on (wal_level=logical) for `rocketmq-tx cdc` on
 * PostgreSQL: its tests and .ci/run. The machine's own server usually runs with
 * wal_level=replica; this one runs from the same PostgreSQL binaries on its own port and data
 * directory:
 *
 *   node scripts/postgres-logical.js start|stop|status
 *
 * Port ROCKETMQ_TX_LOGICAL_PORT (default 5433), data in ROCKETMQ_TX_LOGICAL_HOME (default
 * .postgres-logical/), user postgres with trust authentication on 127.0.0.1, database `test`.
 * PostgreSQL refuses to run as root: as root, the server runs as the `postgres` OS user.
 */
const fs = require('node:fs');
const path = require('node:path');
const childProcess = require('node:child_process');
const proc = require('./lib/proc');
const { printStatus, runCli } = require('./lib/localServer');

const PORT = Number(process.env.ROCKETMQ_TX_LOGICAL_PORT || 5433);
const HOME = path.resolve(
  process.env.ROCKETMQ_TX_LOGICAL_HOME || path.join(__dirname, '..', '.postgres-logical'),
);
const DATA = path.join(HOME, 'data');
const URL = `postgres://postgres@127.0.0.1:${PORT}/test`;

/** The directory of initdb/postgres: PATH, else the newest /usr/lib/postgresql/<v>/bin. */
function binDir() {
  const onPath = proc.which('initdb');
  if (onPath) return path.dirname(fs.realpathSync(onPath));
  const root = '/usr/lib/postgresql';
  const versions = fs.existsSync(root)
    ? fs
        .readdirSync(root)
        .filter((v) => fs.existsSync(path.join(root, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) throw new Error('initdb not found: install the PostgreSQL server package');
  return path.join(root, versions[0], 'bin');
}

/** Runs as the postgres OS user when we are root (the server refuses root). */
function asServerUser(cmd, args) {
  if (process.getuid && process.getuid() === 0) return ['runuser', ['-u', 'postgres', '--', cmd, ...args]];
  return [cmd, args];
}

function pidOf() {
  try {
    const pid = Number.parseInt(
      fs.readFileSync(path.join(DATA, 'postmaster.pid'), 'utf8').split('\n')[0],
      10,
    );
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** CREATE DATABASE test when it is missing (psql from PATH). */
function ensureDatabase() {
  const psql = proc.which('psql') || path.join(binDir(), 'psql');
  const base = ['-h', '127.0.0.1', '-p', String(PORT), '-U', 'postgres', '-d', 'postgres'];
  const exists = childProcess
    .execFileSync(psql, [...base, '-Atc', "SELECT 1 FROM pg_database WHERE datname = 'test'"], {
      encoding: 'utf8',
    })
    .trim();
  if (exists !== '1') childProcess.execFileSync(psql, [...base, '-c', 'CREATE DATABASE test']);
}

async function start({ quiet = false } = {}) {
  const log = quiet ? () => {} : (l) => console.log(`[postgres-logical] ${l}`);
  const running = pidOf();
  if (running && proc.isAlive(running) && (await proc.portOpen(PORT))) {
    ensureDatabase();
    log(`already running (pid ${running}) at ${URL}`);
    return { url: URL, port: PORT, pid: running };
  }
  if (await proc.portOpen(PORT)) {
    throw new Error(`port ${PORT} is taken by another process: set ROCKETMQ_TX_LOGICAL_PORT`);
  }
  const bin = binDir();
  const t0 = Date.now();
  fs.mkdirSync(HOME, { recursive: true });
  const root = process.getuid && process.getuid() === 0;
  if (root) childProcess.execFileSync('chown', ['postgres:', HOME]);
  if (!fs.existsSync(path.join(DATA, 'PG_VERSION'))) {
    log(`initializing ${DATA}`);
    const [cmd, args] = asServerUser(path.join(bin, 'initdb'), [
      '-D',
      DATA,
      '-U',
      'postgres',
      '-A',
      'trust',
      '-E',
      'UTF8',
    ]);
    const res = await proc.run(cmd, args);
    if (res.code !== 0) throw new Error(`initdb failed (exit ${res.code}):\n${res.stderr || res.stdout}`);
  }
  const [cmd, args] = asServerUser(path.join(bin, 'pg_ctl'), [
    '-D',
    DATA,
    '-l',
    path.join(HOME, 'server.log'),
    '-w',
    '-t',
    '60',
    '-o',
    [
      `-p ${PORT}`,
      "-c listen_addresses='127.0.0.1'",
      `-c unix_socket_directories='${HOME}'`,
      '-c wal_level=logical',
      '-c max_replication_slots=8',
      '-c max_wal_senders=8',
      '-c shared_buffers=32MB',
    ].join(' '),
    'start',
  ]);
  const res = await proc.run(cmd, args);
  if (res.code !== 0) {
    throw new Error(
      `pg_ctl start failed (exit ${res.code}): ${res.stderr || res.stdout}\n${proc.tail(path.join(HOME, 'server.log'), 20)}`,
    );
  }
  ensureDatabase();
  log(`ready in ${((Date.now() - t0) / 1000).toFixed(1)} s (pid ${pidOf()}): ${URL}, wal_level=logical`);
  return { url: URL, port: PORT, pid: pidOf() };
}

async function stop({ quiet = false } = {}) {
  const log = quiet ? () => {} : (l) => console.log(`[postgres-logical] ${l}`);
  const pid = pidOf();
  if (!pid || !proc.isAlive(pid)) {
    log('not running');
    return;
  }
  const [cmd, args] = asServerUser(path.join(binDir(), 'pg_ctl'), ['-D', DATA, '-m', 'fast', '-w', 'stop']);
  const res = await proc.run(cmd, args);
  if (res.code !== 0) throw new Error(`pg_ctl stop failed: ${res.stderr || res.stdout}`);
  log(`stopped (pid ${pid})`);
}

function status() {
  return printStatus('postgres-logical', pidOf(), PORT, URL);
}

module.exports = { start, stop, URL, PORT };

if (require.main === module) runCli('postgres-logical', 'postgres-logical.js', { start, stop, status });
