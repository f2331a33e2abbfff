import type { QueryRunner } from 'typeorm';
import { InvalidOptionError } from '../../errors';
import type { DialectName } from './dialect';

/** The database types an entity list or a migration can be built for (a DataSource's `type`). */
export type SchemaDatabase = 'mysql' | 'mariadb' | 'postgres';

/**
 * The column types of the SDK's tables on one database: the only place where the schema differs.
 * MySQL/MariaDB: DATETIME(3) (no time zone; the SDK writes and compares database-clock values
 * only) and MEDIUMBLOB. PostgreSQL: timestamptz(3) (node-postgres reads it back as the right
 * instant whatever the session's TimeZone) and bytea.
 */
export interface SchemaTypes {
  readonly dialect: DialectName;
  /** A millisecond timestamp column. */
  readonly timestamp: 'datetime' | 'timestamptz';
  /** A message body (up to 16 MiB on MySQL; 1 GiB on PostgreSQL). */
  readonly blob: 'mediumblob' | 'bytea';
  /** The default of created_at / consumed_at / updated_at, as the database echoes it back. */
  readonly now: string;
}

const MYSQL: SchemaTypes = {
  dialect: 'mysql',
  timestamp: 'datetime',
  blob: 'mediumblob',
  now: 'CURRENT_TIMESTAMP(3)',
};
const POSTGRES: SchemaTypes = {
  dialect: 'postgres',
  timestamp: 'timestamptz',
  blob: 'bytea',
  now: 'now()',
};

/** The schema types for a DataSource type; throws InvalidOptionError for an unsupported one. */
export function schemaTypes(database: string | undefined): SchemaTypes {
  if (database === 'mysql' || database === 'mariadb') return MYSQL;
  if (database === 'postgres') return POSTGRES;
  throw new InvalidOptionError('database', database, '"mysql", "mariadb" or "postgres"');
}

/** The schema types for the database a migration runs on. */
export function migrationTypes(queryRunner: QueryRunner): SchemaTypes {
  return schemaTypes(queryRunner.connection.options.type);
}

/**
 * Wraps a builder so that each database gets one instance (TypeORM tells entities apart by
 * identity, so asking twice must give the same EntitySchema).
 */
export function perDatabase<T>(build: (types: SchemaTypes) => T): (database: SchemaDatabase) => T {
  const built = new Map<SchemaTypes, T>();
  return (database) => {
    const types = schemaTypes(database);
    let value = built.get(types);
    if (value === undefined) built.set(types, (value = build(types)));
    return value;
  };
}
