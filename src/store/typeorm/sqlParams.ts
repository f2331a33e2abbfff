import type { Dialect } from './dialect';

/**
 * Collects a statement's parameters in order and gives each its placeholder in the dialect's
 * form (`?` on MySQL/MariaDB, `$1`, `$2`, ... on PostgreSQL).
 */
export class SqlParams {
  readonly values: unknown[] = [];

  constructor(private readonly dialect: Dialect) {}

  add(value: unknown): string {
    this.values.push(value);
    return this.dialect.placeholder(this.values.length);
  }

  /** `p1, p2, ...` for an IN list (values must not be empty). */
  list(values: readonly unknown[]): string {
    return values.map((v) => this.add(v)).join(', ');
  }
}

/**
 * Rows changed by a DELETE or UPDATE, from what TypeORM's `query()` returns: mysql2's
 * `{ affectedRows }` (ResultSetHeader), or `[rows, rowCount]` on PostgreSQL.
 */
export function changedRows(dialect: Dialect, result: unknown): number {
  if (dialect.name === 'postgres') return Array.isArray(result) ? Number(result[1] ?? 0) : 0;
  return Number((result as { affectedRows?: number } | undefined)?.affectedRows ?? 0);
}
