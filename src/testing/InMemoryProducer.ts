import type { DataSource, EntityManager, EntitySubscriberInterface, QueryRunner } from 'typeorm';
import { InvalidOptionError, ProducerNotRunningError } from '../errors';
import { prepareEvents, type PreparedEvent, type TransactEvent } from '../outbox/events';
import { resolveDeliveryMode, type DeliveryMode } from '../producer/options';
import type {
  TransactOptions,
  TransactResult,
  TransactionWork,
  TransactionalProducer,
} from '../producer/TransactionalProducer';
import {
  notInitialized,
  requireDataSource,
  requireResourceName,
  RESOURCE_NAME_RE,
} from '../util/clientOptions';
import { optionalInt, rejectUnknownKeys, requireObject, requireString } from '../util/validate';
import { uuidv7 } from '../util/uuidv7';
import type { RecordedMessage } from './messages';

/** What the in-memory producer needs: your DataSource and the topics your code publishes to. */
export interface InMemoryProducerOptions {
  /** Your TypeORM DataSource (any database TypeORM supports, SQLite in memory included), initialized. */
  dataSource: DataSource;
  /** The topics the real producer declares; an event for another topic is refused as it would be. */
  topics: readonly string[];
  /** Carried in TX_ORIGIN as the real producer does. Default "test-producer". */
  producerGroup?: string;
  /** Default 4 MiB (the real producer's default). */
  maxMessageBytes?: number;
}

/** The part of TransactionalProducer that services call; type your dependency with it. */
export type TransactionalProducerLike = Pick<TransactionalProducer, 'transact'>;

/** Per-call options of publish() (same shape as transact's). */
export type PublishOptions = TransactOptions;

/** What publish() resolves with: the ids the events will carry once the caller's transaction commits. */
export interface PublishResult {
  txId: string;
  eventIds: string[];
}

export interface InMemoryProducerStats {
  committed: number;
  rolledBack: number;
}

const KNOWN = ['dataSource', 'topics', 'producerGroup', 'maxMessageBytes'];
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/**
 * A stand-in for TransactionalProducer in unit tests: no broker. `transact` runs your work in a
 * real TypeORM transaction on your DataSource and records the events only if it commits;
 * `publish` joins your transaction and records them when it commits. Read them in `sent`, and
 * feed them to an InMemoryConsumer to run your handlers.
 */
export class InMemoryProducer implements TransactionalProducerLike {
  private readonly dataSource: DataSource;
  private readonly rules: { topics: readonly string[]; producerGroup: string; maxMessageBytes: number };
  private readonly recorded: RecordedMessage[] = [];
  private readonly pending = new WeakMap<QueryRunner, PreparedBatch[]>();
  private readonly counters: InMemoryProducerStats = { committed: 0, rolledBack: 0 };
  private subscriber: EntitySubscriberInterface | undefined;
  private stopped = false;

  constructor(options: InMemoryProducerOptions) {
    const o = requireObject('options', options);
    rejectUnknownKeys('options', o, KNOWN);
    this.dataSource = requireDataSource(o.dataSource);
    if (!Array.isArray(o.topics) || o.topics.length === 0) {
      throw new InvalidOptionError('topics', o.topics, 'a non-empty array of topic names');
    }
    const topics = Array.from(o.topics, (t: unknown, i: number) =>
      requireString(`topics[${i}]`, t, { pattern: RESOURCE_NAME_RE, describe: 'a topic name' }),
    );
    this.rules = {
      topics,
      producerGroup:
        o.producerGroup === undefined
          ? 'test-producer'
          : requireResourceName('producerGroup', o.producerGroup),
      maxMessageBytes: optionalInt(
        'maxMessageBytes',
        o.maxMessageBytes,
        MAX_MESSAGE_BYTES,
        1,
        MAX_MESSAGE_BYTES,
      ),
    };
  }

  /** Nothing to connect; kept so code that starts its producer runs unchanged. */
  async start(): Promise<void> {
    if (this.stopped) throw new ProducerNotRunningError('the InMemoryProducer was shut down');
  }

  /** Detaches the publish() listener from the DataSource. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    if (this.subscriber) {
      const list = this.dataSource.subscribers;
      const i = list.indexOf(this.subscriber);
      if (i >= 0) list.splice(i, 1);
      this.subscriber = undefined;
    }
  }

  /** Every message recorded so far, in commit order (a copy). */
  get sent(): RecordedMessage[] {
    return [...this.recorded];
  }

  /** Counts of transactions committed (events recorded) and rolled back (nothing recorded). */
  get stats(): InMemoryProducerStats {
    return { ...this.counters };
  }

  /** Forgets the recorded messages and counters. */
  clear(): void {
    this.recorded.length = 0;
    this.counters.committed = 0;
    this.counters.rolledBack = 0;
  }

  /**
   * The same contract as TransactionalProducer.transact: validates the events as it does, runs
   * `work(manager, { txId, eventIds })` in one transaction, records the events if it commits,
   * rethrows the work's error unchanged (nothing recorded) if it does not.
   */
  async transact<T>(
    events: TransactEvent | readonly TransactEvent[],
    work: TransactionWork<T>,
    callOptions: TransactOptions = {},
  ): Promise<TransactResult<T>> {
    this.assertUsable();
    if (typeof work !== 'function') {
      throw new InvalidOptionError('work', work, 'a function (manager, { txId, eventIds }) => Promise');
    }
    const delivery = deliveryOf(callOptions);
    const txId = uuidv7();
    const prepared = prepareEvents(events, txId, this.rules);
    const eventIds = prepared.map((p) => p.eventId);
    let result: T;
    try {
      result = await this.dataSource.transaction((manager) => work(manager, { txId, eventIds }));
    } catch (err) {
      this.counters.rolledBack++;
      throw err;
    }
    const messages = this.record({ txId, prepared });
    return { result, txId, delivery, messageIds: delivery === 'transactional' ? messages : [], eventIds };
  }

  /**
   * Joins the caller's transaction (the `manager` of `dataSource.transaction(...)` or of a
   * QueryRunner with an open transaction): the events are recorded when that transaction
   * commits, dropped when it rolls back. Mirrors TransactionalProducer.publish; align with it.
   */
  async publish(
    manager: EntityManager,
    events: TransactEvent | readonly TransactEvent[],
    callOptions: PublishOptions = {},
  ): Promise<PublishResult> {
    this.assertUsable();
    const queryRunner = (manager as { queryRunner?: QueryRunner } | null)?.queryRunner;
    if (!queryRunner || !queryRunner.isTransactionActive) {
      throw new InvalidOptionError('manager', manager, 'an EntityManager inside an open transaction');
    }
    deliveryOf(callOptions);
    const txId = uuidv7();
    const prepared = prepareEvents(events, txId, this.rules);
    this.listen();
    const batches = this.pending.get(queryRunner) ?? [];
    batches.push({ txId, prepared });
    this.pending.set(queryRunner, batches);
    return { txId, eventIds: prepared.map((p) => p.eventId) };
  }

  private assertUsable(): void {
    if (this.stopped) throw new ProducerNotRunningError('the InMemoryProducer was shut down');
    if (!this.dataSource.isInitialized) throw notInitialized();
  }

  private record(batch: PreparedBatch): string[] {
    this.counters.committed++;
    return batch.prepared.map((p) => {
      const m = p.message;
      const messageId = uuidv7();
      this.recorded.push({
        messageId,
        topic: m.topic,
        ...(m.tag !== undefined ? { tag: m.tag } : {}),
        keys: [...m.keys],
        properties: { ...m.properties },
        body: Buffer.from(m.body),
        eventId: p.eventId,
        txId: batch.txId,
        ...(p.envelope ? { envelope: p.envelope } : {}),
      });
      return messageId;
    });
  }

  /** One subscriber per producer: TypeORM tells it about every commit and rollback of the DataSource. */
  private listen(): void {
    if (this.subscriber) return;
    const settle = (queryRunner: QueryRunner, committed: boolean) => {
      // Savepoints fire the same events: act on the outermost transaction only.
      if (queryRunner.isTransactionActive) return;
      const batches = this.pending.get(queryRunner);
      if (!batches) return;
      this.pending.delete(queryRunner);
      for (const b of batches) {
        if (committed) this.record(b);
        else this.counters.rolledBack++;
      }
    };
    this.subscriber = {
      afterTransactionCommit: (event) => settle(event.queryRunner, true),
      afterTransactionRollback: (event) => settle(event.queryRunner, false),
    };
    this.dataSource.subscribers.push(this.subscriber);
  }
}

interface PreparedBatch {
  txId: string;
  prepared: PreparedEvent[];
}

function deliveryOf(callOptions: unknown): DeliveryMode {
  if (typeof callOptions !== 'object' || callOptions === null) {
    throw new InvalidOptionError('transact options', callOptions, 'an object { delivery? }');
  }
  return resolveDeliveryMode('delivery', (callOptions as { delivery?: unknown }).delivery, 'transactional');
}
