import type { DataSource } from 'typeorm';
import { dialectFor } from './dialect';

/**
 * The statement Debezium runs for a snapshot of outbox_event (first start, or the stored position
 * gone from the log): only the rows the engine publishes, CDC rows.
 */
export function cdcSnapshotStatement(type: 'mysql' | 'postgres', database: string): string {
  const table = type === 'postgres' ? '"public"."outbox_event"' : `\`${database}\`.\`outbox_event\``;
  return `SELECT * FROM ${table} WHERE status = 'CDC'`;
}

/**
 * The reads of `rocketmq-tx cdc` and `status --cdc-home`: whether the server's change log can be
 * read (MySQL/MariaDB binlog in ROW format; PostgreSQL logical decoding), and the CDC backlog.
 */
export interface ChangeLogStatus {
  /** SELECT VERSION() (MySQL/MariaDB) or server_version (PostgreSQL). */
  version: string;
  /** The log can be read: log_bin ON and binlog_format ROW, or wal_level logical. */
  readable: boolean;
  /** The settings as the server reports them, for the error message. */
  settings: string;
}

export async function readChangeLogStatus(ds: DataSource): Promise<ChangeLogStatus> {
  if (dialectFor(ds).name === 'postgres') {
    const rows = (await ds.query(
      "SELECT current_setting('server_version') AS v, current_setting('wal_level') AS wal",
    )) as { v: unknown; wal: unknown }[];
    const wal = String(rows[0]?.wal ?? '');
    return { version: String(rows[0]?.v ?? ''), readable: wal === 'logical', settings: `wal_level=${wal}` };
  }
  const rows = (await ds.query('SELECT VERSION() AS v, @@log_bin AS logBin, @@binlog_format AS format')) as {
    v: unknown;
    logBin: unknown;
    format: unknown;
  }[];
  const on = Number(rows[0]?.logBin) === 1;
  const format = String(rows[0]?.format ?? '').toUpperCase();
  return {
    version: String(rows[0]?.v ?? ''),
    readable: on && format === 'ROW',
    settings: `log_bin=${on ? 'ON' : 'OFF'}, binlog_format=${format}`,
  };
}

/** Committed CDC rows the change-log reader has not reached yet, as far as the table can tell. */
export interface CdcBacklog {
  /** CDC rows that occurred after the last row the engine published. */
  events: number;
  /** Age (database clock) of the oldest of them; 0 when there are none. */
  ageMs: number;
}

/**
 * The CDC rows after `lastEventId` (by occurred_at; all CDC rows when the engine has published
 * nothing yet). The engine reports as `lastEventId` the published event with the latest
 * occurred_at, so rows committed out of their occurred_at order are not counted once published;
 * a row still uncommitted when a later one was published is not counted until it is (a long
 * transaction shows up late, never stays counted).
 */
export async function readCdcBacklog(ds: DataSource, lastEventId: string | null): Promise<CdcBacklog> {
  const pg = dialectFor(ds).name === 'postgres';
  const after =
    lastEventId === null
      ? ''
      : ` AND occurred_at > (SELECT l.occurred_at FROM outbox_event l WHERE l.event_id = ${pg ? '$1' : '?'})`;
  const age = pg
    ? 'FLOOR(EXTRACT(EPOCH FROM (CURRENT_TIMESTAMP(3) - MIN(occurred_at))) * 1000000)'
    : 'TIMESTAMPDIFF(MICROSECOND, MIN(occurred_at), CURRENT_TIMESTAMP(3))';
  const rows = (await ds.query(
    `SELECT COUNT(*) AS n, ${age} AS us FROM outbox_event WHERE status = 'CDC'${after}`,
    lastEventId === null ? [] : [lastEventId],
  )) as { n: unknown; us: unknown }[];
  const n = Number(rows[0]?.n ?? 0);
  return { events: n, ageMs: n > 0 ? Math.max(0, Math.round(Number(rows[0]?.us ?? 0) / 1000)) : 0 };
}
