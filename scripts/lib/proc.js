'use strict';
/** Small process / port / file helpers for scripts/rocketmq.js (node builtins only). */
const fs = require('node:fs');
const net = require('node:net');
const childProcess = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');

/** True when a process with this pid exists (signal 0 probes without killing). */
function isAlive(pid) {
  if (!pid || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    return err.code === 'EPERM';
  }
  // A zombie (exited, not yet reaped) still answers signal 0; treat it as dead.
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z' || state === 'X') return false;
  } catch {
    // no /proc (macOS): trust signal 0
  }
  return true;
}

/** The command line of a pid, arguments joined by spaces plus a trailing space ('' when unknown). */
function cmdlineOf(pid) {
  try {
    return `${fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ')} `;
  } catch {
    try {
      return `${childProcess.execFileSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8' }).trim()} `;
    } catch {
      return '';
    }
  }
}

/** Resolves true when something accepts a TCP connection on host:port within timeoutMs. */
function portOpen(port, host = '127.0.0.1', timeoutMs = 1000) {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    let done = false;
    const finish = (result) => {
      if (done) return;
      done = true;
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

/** Best-effort description of who listens on a port ("pid 123 (java)"), '' if unknown. */
function portOwner(port) {
  try {
    const out = childProcess.execFileSync('ss', ['-Hltnp', `sport = :${port}`], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const m = /users:\(\("([^"]+)",pid=(\d+)/.exec(out);
    if (m) return `pid ${m[2]} (${m[1]})`;
  } catch {
    // ss missing: try lsof
  }
  try {
    const out = childProcess.execFileSync('lsof', ['-nP', `-iTCP:${port}`, '-sTCP:LISTEN', '-Fpc'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const pid = /^p(\d+)/m.exec(out);
    const cmd = /^c(.+)/m.exec(out);
    if (pid) return `pid ${pid[1]}${cmd ? ` (${cmd[1]})` : ''}`;
  } catch {
    // unknown
  }
  return '';
}

/** Last n lines of a file ('' when it does not exist). Reads at most the last 256 KiB. */
function tail(file, n = 40) {
  let fd;
  try {
    fd = fs.openSync(file, 'r');
    const size = fs.fstatSync(fd).size;
    const len = Math.min(size, 256 * 1024);
    const buf = Buffer.alloc(len);
    fs.readSync(fd, buf, 0, len, size - len);
    const lines = buf.toString('utf8').split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    return lines.slice(-n).join('\n');
  } catch {
    return '';
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** True when the file contains the text (reads only the file's tail: logs can grow). */
function fileContains(file, text) {
  return tail(file, 400).includes(text);
}

/**
 * Polls `check` (sync or async, returns truthy when done) every intervalMs until timeoutMs.
 * `check` may throw to abort early. Resolves with the truthy value, or rejects with a timeout error.
 */
async function waitUntil(check, { timeoutMs, intervalMs = 200, description }) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await check();
    if (result) return result;
    if (Date.now() >= deadline) {
      const err = new Error(`timed out after ${timeoutMs} ms waiting for ${description}`);
      err.code = 'ETIMEDOUT';
      throw err;
    }
    await sleep(intervalMs);
  }
}

function readPidFile(file) {
  try {
    const pid = Number.parseInt(fs.readFileSync(file, 'utf8').trim(), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Runs a command to completion, capturing output. Resolves { code, signal, stdout, stderr }. */
function run(cmd, args, options = {}) {
  return new Promise((resolve, reject) => {
    const child = childProcess.spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** Full path of an executable found on PATH, or null. */
function which(name) {
  const dirs = (process.env.PATH || '').split(require('node:path').delimiter);
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = require('node:path').join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // keep looking
    }
  }
  return null;
}

module.exports = {
  isAlive,
  cmdlineOf,
  portOpen,
  portOwner,
  tail,
  fileContains,
  waitUntil,
  readPidFile,
  run,
  which,
  sleep,
};
