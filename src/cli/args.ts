import { parseArgs } from 'node:util';
import { InvalidOptionError } from '../errors';
import { RESOURCE_NAME_RE } from '../util/clientOptions';
import type { Io } from './output';

/** A bad command line: the message names the flag, the value and what is allowed. Exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface FlagSpec {
  type: 'string' | 'boolean';
  /** May be given more than once (values are collected). */
  multiple?: boolean;
  short?: string;
  /** Placeholder shown in --help, e.g. "<url>". */
  value?: string;
  description: string;
}

export type FlagSpecs = Record<string, FlagSpec>;

export type ParsedFlags = Record<string, string | boolean | string[] | undefined>;

export interface Parsed {
  flags: ParsedFlags;
  positionals: string[];
}

/** Flags every command takes. */
export const COMMON_FLAGS: FlagSpecs = {
  help: { type: 'boolean', short: 'h', description: 'show this help and exit' },
  verbose: { type: 'boolean', short: 'v', description: 'log info/debug lines and print stack traces' },
};

export const DB_FLAGS: FlagSpecs = {
  'db-url': {
    type: 'string',
    value: '<url>',
    description:
      'mysql://, mariadb://, postgres:// or postgresql:// URL without a password (env ROCKETMQ_TX_DB_URL; password in ' +
      'ROCKETMQ_TX_DB_PASSWORD or in the env URL); default mysql://root@127.0.0.1:3306/test',
  },
};

export const JSON_FLAG: FlagSpecs = {
  json: { type: 'boolean', description: 'print the result as JSON on stdout (progress stays on stderr)' },
};

/**
 * node:util parseArgs in strict mode, with its errors turned into UsageErrors that name the flag
 * and list what is allowed.
 */
export function parseFlags(specs: FlagSpecs, argv: readonly string[], maxPositionals = 0): Parsed {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = {};
  for (const [name, s] of Object.entries(specs)) {
    options[name] = {
      type: s.type,
      ...(s.multiple ? { multiple: true } : {}),
      ...(s.short ? { short: s.short } : {}),
    };
  }
  let result: { values: ParsedFlags; positionals: string[] };
  try {
    result = parseArgs({ args: [...argv], options, strict: true, allowPositionals: true }) as {
      values: ParsedFlags;
      positionals: string[];
    };
  } catch (err) {
    throw translateParseError(err, specs);
  }
  if (result.positionals.length > maxPositionals) {
    const extra = result.positionals[maxPositionals]!;
    throw new UsageError(
      `unexpected argument ${JSON.stringify(extra)}` +
        (maxPositionals === 0 ? ' (this command takes flags only)' : ''),
    );
  }
  return { flags: result.values, positionals: result.positionals };
}

function flagList(specs: FlagSpecs): string {
  return Object.keys(specs)
    .map((n) => `--${n}`)
    .join(', ');
}

function translateParseError(err: unknown, specs: FlagSpecs): UsageError {
  const code = (err as { code?: unknown }).code;
  const message = err instanceof Error ? err.message : String(err);
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const flag = /'([^']+)'/.exec(message)?.[1] ?? message;
    return new UsageError(`unknown flag ${flag} (allowed: ${flagList(specs)})`);
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const flag = /'(-[^' ]+)/.exec(message)?.[1] ?? '';
    const spec = specs[flag.replace(/^--?/, '')];
    if (/does not take an argument/.test(message)) {
      return new UsageError(`${flag} takes no value (it is a switch)`);
    }
    if (/ambiguous/.test(message)) {
      return new UsageError(
        `${flag} needs a value${spec?.value ? ` ${spec.value}` : ''} (got the next flag instead; ` +
          `write ${flag}=<value> for a value that starts with "-")`,
      );
    }
    return new UsageError(`${flag} needs a value${spec?.value ? ` ${spec.value}` : ''}`);
  }
  return new UsageError(message);
}

export function stringFlag(flags: ParsedFlags, name: string): string | undefined {
  const v = flags[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new UsageError(`--${name} takes one value`);
  return v;
}

export function boolFlag(flags: ParsedFlags, name: string): boolean {
  return flags[name] === true;
}

function quote(raw: string): string {
  return JSON.stringify(raw.length > 80 ? `${raw.slice(0, 77)}...` : raw);
}

export function invalid(flag: string, raw: string, allowed: string): UsageError {
  return new UsageError(`invalid --${flag} ${quote(raw)}: expected ${allowed}`);
}

export function intFlag(
  flags: ParsedFlags,
  name: string,
  rule?: { min: number; max: number },
): number | undefined {
  const raw = stringFlag(flags, name);
  if (raw === undefined) return undefined;
  const n = /^-?\d+$/.test(raw.trim()) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || (rule && (n < rule.min || n > rule.max))) {
    throw invalid(name, raw, rule ? `an integer from ${rule.min} to ${rule.max}` : 'an integer');
  }
  return n;
}

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 7 * 86_400_000,
};

/** "500ms", "30s", "5m", "2h", "7d", "1w", or a sequence such as "1h30m". */
export function parseDuration(raw: string): number | undefined {
  const text = raw.trim();
  if (text === '') return undefined;
  let total = 0;
  let rest = text;
  const part = /^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/;
  while (rest.length > 0) {
    const m = part.exec(rest);
    if (!m) return undefined;
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    rest = rest.slice(m[0].length);
  }
  return Math.round(total);
}

export const DURATION_RULE = 'a duration such as 500ms, 30s, 5m, 2h, 7d or 1h30m';

export function durationFlag(
  flags: ParsedFlags,
  name: string,
  rule: { minMs: number; maxMs: number },
): number | undefined {
  const raw = stringFlag(flags, name);
  if (raw === undefined) return undefined;
  const ms = parseDuration(raw);
  if (ms === undefined) throw invalid(name, raw, DURATION_RULE);
  if (ms < rule.minMs || ms > rule.maxMs) {
    throw invalid(name, raw, `a duration from ${formatMs(rule.minMs)} to ${formatMs(rule.maxMs)}`);
  }
  return ms;
}

/** The largest whole unit that fits, for limits in messages ("7d", "30s", "500ms"). */
export function formatMs(ms: number): string {
  for (const unit of ['w', 'd', 'h', 'm', 's'] as const) {
    const size = UNIT_MS[unit]!;
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** A comma-separated list of topic or group names (the flag may also be repeated). */
export function topicsFlag(flags: ParsedFlags, name: string, what: 'topic' | 'group' = 'topic'): string[] {
  const v = flags[name];
  if (v === undefined) return [];
  const raws = Array.isArray(v) ? v : [String(v)];
  const out: string[] = [];
  for (const raw of raws) {
    for (const t of raw.split(',').map((s) => s.trim())) {
      if (!RESOURCE_NAME_RE.test(t)) {
        throw invalid(name, raw, `comma-separated ${what} names of 1-127 letters, digits, "_", "-" or "%"`);
      }
      if (!out.includes(t)) out.push(t);
    }
  }
  return out;
}

/** An ISO-8601 date or date-time ("2026-01-31", "2026-01-31T12:00:00Z"). */
export function dateFlag(flags: ParsedFlags, name: string): Date | undefined {
  const raw = stringFlag(flags, name);
  if (raw === undefined) return undefined;
  const ok = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(raw);
  const d = new Date(raw);
  if (!ok || Number.isNaN(d.getTime())) {
    throw invalid(name, raw, 'an ISO-8601 date or date-time such as 2026-01-31 or 2026-01-31T12:00:00Z');
  }
  return d;
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines;
}

/** The help text of a command, generated from its flag specs so it always matches them. */
export function helpText(usage: string, description: string, specs: FlagSpecs): string {
  const rows = Object.entries(specs).map(([name, s]) => {
    const left = `${s.short ? `-${s.short}, ` : '    '}--${name}${s.value ? ` ${s.value}` : ''}`;
    return { left, right: s.description + (s.multiple ? ' (repeatable)' : '') };
  });
  const width = Math.min(34, Math.max(...rows.map((r) => r.left.length)) + 2);
  const indent = ' '.repeat(width + 2);
  const lines = rows.map((r) => {
    const text = wrap(r.right, Math.max(40, 100 - width));
    const first =
      r.left.length + 2 > width
        ? [`  ${r.left}`, `${indent}${text[0]}`]
        : [`  ${r.left.padEnd(width)}${text[0]}`];
    return [...first, ...text.slice(1).map((t) => `${indent}${t}`)].join('\n');
  });
  return `Usage: ${usage}\n\n${description}\n\nFlags:\n${lines.join('\n')}\n`;
}

/** Library option names bound to the flags they came from, to report a library validation error as a flag error. */
export class FlagBindings {
  private readonly bound = new Map<string, { flag: string; raw: string; duration: boolean }>();

  bind(option: string, flag: string, raw: string | undefined, kind: 'value' | 'duration' = 'value'): void {
    if (raw !== undefined) this.bound.set(option, { flag, raw, duration: kind === 'duration' });
  }

  /** A UsageError for an InvalidOptionError on a bound option (e.g. "transactionTopics[0]"), else undefined. */
  translate(err: unknown): UsageError | undefined {
    if (!(err instanceof InvalidOptionError)) return undefined;
    const base = err.option.replace(/^options\./, '').replace(/\[\d+\]$/, '');
    const hit = this.bound.get(base);
    if (!hit) return undefined;
    const allowed =
      hit.duration && err.range
        ? `a duration from ${formatMs(err.range.min)} to ${formatMs(err.range.max)}`
        : err.allowed;
    return invalid(hit.flag, hit.raw, allowed);
  }
}

export interface CommandContext {
  io: Io;
  /** Registers a handler for SIGINT/SIGTERM; returns a function that removes it. */
  onSignal(handler: (signal: string) => void): () => void;
}

export interface Command {
  name: string;
  usage: string;
  description: string;
  /** Every flag the command takes (COMMON_FLAGS included). */
  flags: FlagSpecs;
  maxPositionals?: number;
  run(parsed: Parsed, ctx: CommandContext): Promise<number>;
}
