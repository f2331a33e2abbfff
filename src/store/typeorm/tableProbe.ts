import type { DataSource } from 'typeorm';

/**
 * Reads no row of `table` (one of the SDK's own table names, never user input): rejects with the
 * driver's error when the table is missing or the user may not read it. Same statement on every
 * database.
 */
export async function probeTable(ds: DataSource, table: string): Promise<void> {
  await ds.query(`SELECT 1 FROM ${table} WHERE 1 = 0`);
}
