import type { DataSource } from 'typeorm';
import type { InboxStore, OutboxStore, TxRecordStore, TxStatusReader } from './ports';
import { TypeOrmTxRecordStore } from './typeorm/TypeOrmTxRecordStore';
import { dialectFor, type Dialect } from './typeorm/dialect';
import { TypeOrmInboxStore } from './typeorm/inboxStore';
import { TypeOrmOutboxStore } from './typeorm/outboxStore';

/** The stores of one DataSource, each holding the statements of its database. */
export interface Stores {
  readonly dialect: Dialect;
  /** tx_record: the producer's insert, the check-back fence, confirmations. */
  readonly txRecords: TxRecordStore & TxStatusReader;
  /** outbox_event: the producer's event rows, the relay's claims, discard recovery. */
  readonly outbox: OutboxStore;
  /** consumed_event and aggregate_cursor: the consumer's dedupe and ordering. */
  readonly inbox: InboxStore;
}

/**
 * The one way producer, consumer and relay get their stores for a DataSource: the database is
 * read from the DataSource (`type`), so components never name a database-specific class. Each
 * store is built on first use (none holds a connection of its own); that throws
 * InvalidOptionError for a database the SDK does not support.
 */
export function storesFor(dataSource: DataSource): Stores {
  let dialect: Dialect | undefined;
  let txRecords: TypeOrmTxRecordStore | undefined;
  let outbox: TypeOrmOutboxStore | undefined;
  let inbox: TypeOrmInboxStore | undefined;
  return {
    get dialect() {
      return (dialect ??= dialectFor(dataSource));
    },
    get txRecords() {
      return (txRecords ??= new TypeOrmTxRecordStore(dataSource));
    },
    get outbox() {
      return (outbox ??= new TypeOrmOutboxStore(dataSource));
    },
    get inbox() {
      return (inbox ??= new TypeOrmInboxStore(dataSource));
    },
  };
}
