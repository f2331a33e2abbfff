import type { DataSource } from 'typeorm';
import { dialectFor } from './dialect';
import { SqlParams } from './sqlParams';
import { toStoreError } from './storeError';

/** One event of a committed transaction of a producer group (the chaos runner's truth). */
export interface CommittedEventRow {
  eventId: string;
  txId: string;
}

/**
 * The events of every COMMITTED transaction of `producerGroup` (tx_record joined with
 * outbox_event): what must be delivered. Used by the crash-window runner (rocketmq-tx/testing).
 */
export async function committedEventsOf(
  dataSource: DataSource,
  producerGroup: string,
): Promise<CommittedEventRow[]> {
  const p = new SqlParams(dialectFor(dataSource));
  const sql =
    'SELECT o.event_id, o.tx_id FROM outbox_event o JOIN tx_record t ON t.tx_id = o.tx_id ' +
    `WHERE t.producer_group = ${p.add(producerGroup)} AND t.status = 'COMMITTED'`;
  try {
    const rows: Array<{ event_id: string; tx_id: string }> = await dataSource.query(sql, p.values);
    return rows.map((r) => ({ eventId: String(r.event_id), txId: String(r.tx_id) }));
  } catch (err) {
    throw toStoreError('could not read the committed events of the producer group', err);
  }
}

/** tx_record status per transaction of `producerGroup` (COMMITTED or ROLLED_BACK; absent: no row). */
export async function txStatusesOf(
  dataSource: DataSource,
  producerGroup: string,
): Promise<Map<string, string>> {
  const p = new SqlParams(dialectFor(dataSource));
  const sql = `SELECT tx_id, status FROM tx_record WHERE producer_group = ${p.add(producerGroup)}`;
  try {
    const rows: Array<{ tx_id: string; status: string }> = await dataSource.query(sql, p.values);
    return new Map(rows.map((r) => [String(r.tx_id), String(r.status)]));
  } catch (err) {
    throw toStoreError('could not read the transactions of the producer group', err);
  }
}
