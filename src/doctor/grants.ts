import {
  mysqlTableGrant,
  postgresTableGrant,
  tableGrants,
  type GrantComponent,
} from '../store/typeorm/grants';
import type { DialectName } from '../store/typeorm/dialect';
import { check, type DoctorCheck } from './report';

/** PostgreSQL: ownership is not granted; the other privileges are, per table. */
function pgAdvice(missing: readonly string[], table: string, role: string): string {
  const grantable = missing.filter((p) => p !== 'OWNER');
  const parts: string[] = [];
  if (grantable.length > 0) parts.push(postgresTableGrant(grantable, table, role));
  if (missing.includes('OWNER'))
    parts.push(`run the migrations as "${role}" (or ALTER TABLE ${table} OWNER TO "${role}")`);
  return `${parts.join('; ')} (rocketMqTxGrants with dialect 'postgres', docs/security.md)`;
}

/** One table-level (or wider) grant of the connected user, parsed from SHOW GRANTS. */
export interface ParsedGrant {
  /** Database name pattern ('*' = every database). */
  database: string;
  /** Table name ('*' = every table of the database). */
  table: string;
  /** Upper-case privileges; ALL PRIVILEGES is 'ALL'; WITH GRANT OPTION adds 'GRANT OPTION'. */
  privileges: string[];
}

const NAME = '(`(?:[^`]|``)*`|\\*|[A-Za-z0-9_$]+)';
const GRANT_RE = new RegExp(`^GRANT\\s+(.+?)\\s+ON\\s+(?:TABLE\\s+)?${NAME}(?:\\.${NAME})?\\s+TO\\s+`, 'i');

function unquote(name: string): string {
  return name.startsWith('`') ? name.slice(1, -1).replace(/``/g, '`') : name;
}

/** Splits "SELECT (a, b), INSERT" at top-level commas. */
function splitPrivileges(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out.map((s) => s.trim()).filter(Boolean);
}

/**
 * Parses the lines of SHOW GRANTS (MariaDB and MySQL). Column-level privileges ("SELECT (a)"),
 * routine grants, PROXY and role grants are left out: only table-level or wider privileges let
 * the SDK's statements run. The lines themselves are never printed (they may hold a password hash).
 */
export function parseGrants(lines: readonly string[]): ParsedGrant[] {
  const out: ParsedGrant[] = [];
  for (const line of lines) {
    if (/^GRANT\s+.+\s+ON\s+(FUNCTION|PROCEDURE|PACKAGE)\s/i.test(line)) continue;
    const m = GRANT_RE.exec(line.trim());
    if (!m) continue;
    const first = unquote(m[2]!);
    const second = m[3] === undefined ? undefined : unquote(m[3]);
    // "ON tbl" without a database means the current one; SHOW GRANTS always qualifies, so skip it.
    if (second === undefined) continue;
    const privileges = splitPrivileges(m[1]!)
      .filter((p) => !p.includes('('))
      .map((p) => p.toUpperCase().replace(/\s+/g, ' '))
      .map((p) => (p === 'ALL PRIVILEGES' ? 'ALL' : p));
    if (/\bWITH\b.*\bGRANT OPTION\b/i.test(line)) privileges.push('GRANT OPTION');
    if (privileges.length > 0) out.push({ database: first, table: second, privileges });
  }
  return out;
}

/** MySQL/MariaDB database-level grants may use LIKE wildcards (% and _, escaped with \). */
function databaseMatches(pattern: string, database: string): boolean {
  if (pattern === '*') return true;
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === '\\' && i + 1 < pattern.length) re += escapeRe(pattern[++i]!);
    else if (ch === '%') re += '.*';
    else if (ch === '_') re += '.';
    else re += escapeRe(ch);
  }
  return new RegExp(`^${re}$`, 'i').test(database);
}

function escapeRe(ch: string): string {
  return ch.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The privileges the user has on database.table, and whether they come from a wider grant. */
export function privilegesOn(grants: readonly ParsedGrant[], database: string, table: string): Set<string> {
  const out = new Set<string>();
  for (const g of grants) {
    if (g.privileges.every((p) => p === 'USAGE')) continue;
    if (!databaseMatches(g.database, database)) continue;
    if (g.table !== '*' && g.table.toLowerCase() !== table.toLowerCase()) continue;
    for (const p of g.privileges) if (p !== 'USAGE') out.add(p);
  }
  return out;
}

/** Privileges a runtime user should not hold on the SDK's tables: they can drop or reshape the fence. */
export const RISKY_PRIVILEGES = [
  'ALL',
  'OWNER',
  'TRUNCATE',
  'DROP',
  'ALTER',
  'CREATE',
  'INDEX',
  'TRIGGER',
  'GRANT OPTION',
] as const;

/**
 * One check per SDK table the components need: fail naming each missing privilege, warn on a
 * risky excess (DDL on a runtime user). `tables` limits the comparison to the tables in use
 * (leaves out the archive when there is none).
 */
export function compareGrants(
  grants: readonly ParsedGrant[],
  database: string,
  components: readonly GrantComponent[],
  options: { archive: boolean; account: string; migrationsTableName?: string; dialect?: DialectName },
): DoctorCheck[] {
  const pg = options.dialect === 'postgres';
  const needed = new Map<string, Set<string>>();
  for (const c of components) {
    for (const [table, privileges] of Object.entries(
      tableGrants(c, {
        archive: options.archive,
        ...(pg ? { dialect: 'postgres' as const } : {}),
        ...(options.migrationsTableName !== undefined
          ? { migrationsTableName: options.migrationsTableName }
          : {}),
      }),
    )) {
      const set = needed.get(table) ?? new Set<string>();
      for (const p of privileges) set.add(p);
      needed.set(table, set);
    }
  }
  const migrations = components.includes('migrations');
  const who = `${options.account} (${components.join(', ')})`;
  return [...needed.entries()].map(([table, required]) => {
    const id = `grants.${table}`;
    const has = privilegesOn(grants, database, table);
    const all = has.has('ALL');
    const missing = [...required].filter((p) => !all && !has.has(p));
    const allName = pg ? 'SUPERUSER' : 'ALL PRIVILEGES';
    const risky = migrations
      ? []
      : RISKY_PRIVILEGES.filter((p) => has.has(p)).map((p) => (p === 'ALL' ? allName : p));
    const shown = all ? allName : [...has].sort().join(', ') || 'none';
    const threshold = `${[...required].join(', ')}${migrations ? '' : '; no DDL'}`;
    if (missing.length > 0) {
      return check('grants', id, 'fail', `${who} lacks ${missing.join(', ')} on ${table} (has ${shown})`, {
        threshold,
        advice: pg
          ? pgAdvice(missing, table, options.account)
          : `${mysqlTableGrant(missing, database, table, options.account)} (rocketMqTxGrants, docs/security.md)`,
      });
    }
    if (risky.length > 0) {
      return check('grants', id, 'warn', `${who} has ${risky.join(', ')} on ${table} (has ${shown})`, {
        threshold,
        advice:
          'a runtime user should not be able to drop or alter the SDK tables: grant exactly ' +
          `rocketMqTxGrants('${components[0]}', ...) and REVOKE the rest (docs/security.md)` +
          (pg ? '; the tables belong to the migrations role, not a runtime role' : ''),
      });
    }
    return check('grants', id, 'pass', `${shown} on ${table}`, { threshold });
  });
}
