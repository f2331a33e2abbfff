import { RocketMqTxError } from '../errors';
import type { Logger } from '../util/logger';

/** Where a command writes, and the environment it reads: process streams in main, fakes in tests. */
export interface Io {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  env: Record<string, string | undefined>;
}

/**
 * A failure that is not a usage error (unreachable database or broker, missing tables, a failed
 * statement): printed as one line, exit code 1; the cause's stack only with --verbose.
 */
export class CliError extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'CliError';
  }
}

/** Replaces the password of a connection URL (and of anything URL-shaped in a message) with ***. */
export function maskSecrets(text: string): string {
  return text.replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)[^@\s]*@/gi, '$1***@');
}

export function printJson(io: Io, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Progress and notices: stderr, so stdout stays the command's result. */
export function note(io: Io, line: string): void {
  io.stderr.write(`${line}\n`);
}

export type Cell = string | number | null | undefined;

/** A plain text table; numbers are right-aligned. */
export function renderTable(headers: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const text = rows.map((r) => r.map((c) => (c === null || c === undefined ? '-' : String(c))));
  const widths = headers.map((h, i) => Math.max(h.length, ...text.map((r) => r[i]?.length ?? 0)));
  const numeric = headers.map((_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number'));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...text.map(line)].join('\n') + '\n';
}

/** "850 ms", "12.3 s", "5 m 07 s", "3 h 20 m", "2 d 04 h". */
export function formatAge(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '-';
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const pad = (n: number) => String(Math.floor(n)).padStart(2, '0');
  if (s < 3600) return `${Math.floor(s / 60)} m ${pad(s % 60)} s`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${pad((s % 3600) / 60)} m`;
  return `${Math.floor(s / 86_400)} d ${pad((s % 86_400) / 3600)} h`;
}

/** One line for an error: its message, then the messages of its causes. */
export function describeError(err: unknown): string {
  const parts: string[] = [];
  let e: unknown = err;
  for (let depth = 0; e !== undefined && e !== null && depth < 4; depth++) {
    const msg = e instanceof Error ? e.message : String(e);
    const code = (e as { code?: unknown }).code;
    const tag =
      typeof code === 'string' && !(e instanceof RocketMqTxError) && !msg.includes(code) ? code : '';
    const text = [tag, msg].filter(Boolean).join(': ');
    if (text && !parts.some((p) => p.includes(text))) parts.push(text);
    e = e instanceof Error ? e.cause : undefined;
  }
  return maskSecrets(parts.join(': ').replace(/\s*\n\s*/g, ' '));
}

/** Every stack of the error and its causes, for --verbose. */
export function errorStacks(err: unknown): string {
  const out: string[] = [];
  let e: unknown = err;
  for (let depth = 0; e instanceof Error && depth < 4; depth++) {
    out.push((depth > 0 ? 'caused by: ' : '') + (e.stack ?? e.message));
    e = e.cause;
  }
  return maskSecrets(out.join('\n'));
}

/**
 * A pino-shaped logger on stderr for the library components a command runs: warnings and errors
 * always, info and debug with --verbose. The SDK never logs credentials; URLs are masked anyway.
 */
export function stderrLogger(io: Io, verbose: boolean, repeatWindowMs = 30_000): Logger {
  // The same warning every poll (a missing table, a database outage) is printed once per window;
  // errors (an event that became DEAD) always.
  const seen = new Map<string, { at: number; suppressed: number }>();
  const write = (level: string, fields: Record<string, unknown>, message: string, dedupe = true) => {
    const key = `${level} ${message}`;
    const now = Date.now();
    const last = seen.get(key);
    if (dedupe && last && now - last.at < repeatWindowMs) {
      last.suppressed++;
      return;
    }
    const again = last && last.suppressed > 0 ? ` (and ${last.suppressed} more like it since)` : '';
    seen.set(key, { at: now, suppressed: 0 });
    const extra = Object.keys(fields).length > 0 ? ` ${safeJson(fields)}` : '';
    io.stderr.write(maskSecrets(`${new Date(now).toISOString()} ${level} ${message}${extra}${again}`) + '\n');
  };
  // The RocketMQ client's own retry chatter only with --verbose; the SDK's warnings always.
  const shown = (f: Record<string, unknown>) => verbose || f.component !== 'rocketmq-client';
  return {
    debug: (f, m) => verbose && write('debug', f, m, false),
    info: (f, m) => verbose && write('info', f, m, false),
    warn: (f, m) => shown(f) && write('warn', f, m),
    error: (f, m) => shown(f) && write('error', f, m, false),
  };
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch {
    return '(unserializable fields)';
  }
}
