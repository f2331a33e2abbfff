/** What the machine does while a column runs: broker CPU, database commit rate, load. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DataSource } from 'typeorm';

const CLOCK_TICKS = 100;

/** The proxy's pid (it embeds the broker), from scripts/rocketmq.js status; undefined if unknown. */
export function brokerPid(): number | undefined {
  try {
    const status = execFileSync(
      process.execPath,
      [path.resolve(__dirname, '../../scripts/rocketmq.js'), 'status'],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const m = /proxy\s+running, pid (\d+)/.exec(status);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** CPU time of a process in ms (utime + stime), from /proc; NaN when unreadable. */
export function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}

/** Busy CPU of the whole machine in ms (all cores), from /proc/stat. */
export function machineBusyMs(): number {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const idle = (cpu[3] ?? 0) + (cpu[4] ?? 0);
    const total = cpu.reduce((s, v) => s + v, 0);
    return ((total - idle) * 1000) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}

export interface DbCounters {
  commits: number;
  fsyncs: number;
  rowLockWaits: number;
}

/**
 * Server-wide counters (they include other users of the server: read them as deltas). MySQL:
 * Com_commit, Innodb_os_log_fsyncs, Innodb_row_lock_waits; PostgreSQL: the bench database's
 * xact_commit, pg_stat_wal's wal_sync, no lock-wait counter (NaN).
 */
export async function dbCounters(ds: DataSource): Promise<DbCounters> {
  if (ds.options.type === 'postgres') {
    const [row]: Array<{ commits: string; fsyncs: string }> = await ds.query(
      `SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits,
              (SELECT wal_sync FROM pg_stat_wal) AS fsyncs`,
    );
    return { commits: Number(row?.commits ?? NaN), fsyncs: Number(row?.fsyncs ?? NaN), rowLockWaits: NaN };
  }
  const rows: Array<{ Variable_name: string; Value: string }> = await ds.query(
    "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Innodb_os_log_fsyncs', 'Innodb_row_lock_waits')",
  );
  const v = (name: string) => Number(rows.find((r) => r.Variable_name === name)?.Value ?? NaN);
  return {
    commits: v('Com_commit'),
    fsyncs: v('Innodb_os_log_fsyncs'),
    rowLockWaits: v('Innodb_row_lock_waits'),
  };
}

export interface Window {
  elapsedMs: number;
  brokerCpuPct: number;
  machineBusyPct: number;
  dbCommitsPerSec: number;
  dbFsyncsPerSec: number;
}

/** Starts measuring; the returned function ends the window and reports rates over it. */
export async function openWindow(ds: DataSource, pid: number | undefined): Promise<() => Promise<Window>> {
  const t0 = Date.now();
  const b0 = processCpuMs(pid);
  const m0 = machineBusyMs();
  const d0 = await dbCounters(ds);
  return async () => {
    const elapsedMs = Date.now() - t0;
    const d1 = await dbCounters(ds);
    return {
      elapsedMs,
      brokerCpuPct: ((processCpuMs(pid) - b0) / elapsedMs) * 100,
      machineBusyPct: ((machineBusyMs() - m0) / elapsedMs / os.cpus().length) * 100,
      dbCommitsPerSec: ((d1.commits - d0.commits) * 1000) / elapsedMs,
      dbFsyncsPerSec: ((d1.fsyncs - d0.fsyncs) * 1000) / elapsedMs,
    };
  };
}

export function machineDescription(): string {
  const cpus = os.cpus();
  return `${cpus.length} x ${cpus[0]?.model.trim() ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}, Node ${process.version}`;
}

export function loadAverage(): string {
  return os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
}
