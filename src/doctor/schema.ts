import type { DataSource, QueryRunner, Table, TableIndex } from 'typeorm';
import { rocketMqTxArchiveMigrations } from '../store/typeorm/outboxArchiveMigrations';
import { rocketMqTxMigrations } from '../store/typeorm/migrations';
import type { DialectName } from '../store/typeorm/dialect';
import { doctorQueries, type ActualSchema } from '../store/typeorm/doctorQueries';
import { check, type DoctorCheck } from './report';

/** A table as the migrations create it. */
export interface ExpectedTable {
  name: string;
  columns: string[];
  primaryKey: string[];
  indexes: Array<{ name: string; columns: string[]; unique: boolean }>;
  /** Which migration list creates it: the advice names it. */
  migrations: 'rocketMqTxMigrations' | 'rocketMqTxArchiveMigrations';
}

type MigrationClass = new () => { up(queryRunner: QueryRunner): Promise<void> };

/**
 * The tables and indexes the migrations create, read by running their `up()` against a query
 * runner that records createTable/createIndex calls instead of executing them: the expected
 * schema is the migrations themselves, never a copy that could drift.
 */
export async function expectedSchema(dialect: DialectName = 'mysql'): Promise<ExpectedTable[]> {
  const tables = new Map<string, ExpectedTable>();
  const record = async (list: readonly MigrationClass[], migrations: ExpectedTable['migrations']) => {
    const recorder = {
      connection: { options: { type: dialect } },
      async createTable(table: Table) {
        tables.set(table.name, {
          name: table.name,
          columns: table.columns.map((c) => c.name),
          primaryKey: table.columns.filter((c) => c.isPrimary).map((c) => c.name),
          indexes: table.indices.map(indexOf),
          migrations,
        });
      },
      async createIndex(tableName: string, index: TableIndex) {
        tables.get(tableName)?.indexes.push(indexOf(index));
      },
    };
    for (const M of list) await new M().up(recorder as unknown as QueryRunner);
  };
  await record(rocketMqTxMigrations, 'rocketMqTxMigrations');
  await record(rocketMqTxArchiveMigrations, 'rocketMqTxArchiveMigrations');
  return [...tables.values()];
}

function indexOf(index: TableIndex) {
  return {
    name: index.name ?? '(unnamed)',
    columns: [...index.columnNames],
    unique: index.isUnique === true,
  };
}

/** What information_schema shows of the SDK's tables in the current database (schema). */
export type { ActualSchema };

export function readSchema(ds: DataSource, tables: readonly string[]): Promise<ActualSchema> {
  return doctorQueries(ds).schema(ds, tables);
}

const list = (cols: readonly string[]) => `(${cols.join(', ')})`;

/**
 * One check per expected table. information_schema hides a table from a user without a
 * privilege on it, so "absent" then proves nothing: that is a warning (a skip when the named
 * components do not use it), never "missing".
 */
export function compareSchema(
  expected: readonly ExpectedTable[],
  actual: ActualSchema,
  access: {
    /** The user has a privilege on it (else information_schema hides it). */
    visible: (table: string) => boolean;
    /** The named components use it; undefined when no component was named. */
    used: (table: string) => boolean | undefined;
    /** Absent is fine (the archive, unless required). */
    optional: (table: string) => boolean;
  },
): DoctorCheck[] {
  const lower = (s: string) => s.toLowerCase();
  return expected.map((e) => {
    const id = `schema.${e.name}`;
    const fix = `run the migrations (${e.migrations}, e.g. dataSource.runMigrations())`;
    const table = actual.tables.find((t) => lower(t.t) === lower(e.name));
    if (!table) {
      if (access.optional(e.name)) {
        return check('schema', id, 'skip', 'absent (optional)', {
          advice: `needed only for Retention.archive / rocketmq-tx archive: ${fix}`,
        });
      }
      if (!access.visible(e.name)) {
        if (access.used(e.name) === false) {
          return check('schema', id, 'skip', 'not visible to this user (no privilege on it)', {
            advice: 'not used by the components named; check it as a user that can see it',
          });
        }
        return check('schema', id, 'warn', 'not visible to this user (no privilege on it)', {
          threshold: 'exists',
          advice: `cannot tell whether it exists: run doctor as a user with a privilege on ${e.name}`,
        });
      }
      return check('schema', id, 'fail', 'missing table', { threshold: 'exists', advice: fix });
    }
    const problems: string[] = [];
    if (table.engine !== null && lower(table.engine) !== 'innodb') {
      problems.push(`engine ${table.engine} (the fence needs InnoDB row locks)`);
    }
    const cols = new Set(actual.columns.filter((c) => lower(c.t) === lower(e.name)).map((c) => lower(c.c)));
    const missingCols = e.columns.filter((c) => !cols.has(lower(c)));
    if (missingCols.length > 0)
      problems.push(`missing column${missingCols.length > 1 ? 's' : ''} ${missingCols.join(', ')}`);
    const byIndex = new Map<string, { columns: string[]; unique: boolean }>();
    for (const r of actual.indexes.filter((x) => lower(x.t) === lower(e.name))) {
      const entry = byIndex.get(lower(r.i)) ?? { columns: [], unique: r.nonUnique === 0 };
      entry.columns.push(r.c);
      byIndex.set(lower(r.i), entry);
    }
    const pk = byIndex.get('primary');
    if (!pk) problems.push(`no primary key (expected ${list(e.primaryKey)})`);
    else if (lower(pk.columns.join()) !== lower(e.primaryKey.join())) {
      problems.push(`primary key ${list(pk.columns)} (expected ${list(e.primaryKey)})`);
    }
    for (const ix of e.indexes) {
      const found = byIndex.get(lower(ix.name));
      if (!found) problems.push(`missing index ${ix.name} ${list(ix.columns)}`);
      else if (lower(found.columns.join()) !== lower(ix.columns.join())) {
        problems.push(`index ${ix.name} is ${list(found.columns)} (expected ${list(ix.columns)})`);
      } else if (found.unique !== ix.unique) {
        problems.push(
          `index ${ix.name} is ${found.unique ? '' : 'not '}UNIQUE (expected ${ix.unique ? '' : 'not '}UNIQUE)`,
        );
      }
    }
    const n = e.indexes.length;
    const indexes = `primary key ${list(e.primaryKey)} + ${n} index${n === 1 ? '' : 'es'}`;
    const threshold = `as the migrations create it: ${indexes}`;
    if (problems.length === 0) {
      return check('schema', id, 'pass', `present: ${e.columns.length} columns, ${indexes}`, { threshold });
    }
    return check('schema', id, 'fail', problems.join('; '), {
      threshold,
      advice: `${fix}; a missing index: recreate it as the migration defines it (index name and columns above)`,
    });
  });
}
