import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { rocketMqTxArchiveMigrations, rocketMqTxEntitiesFor, rocketMqTxMigrations, uuidv7 } from '../../src';
import { classifyAny } from '../../src/store/typeorm/dialect';
import { outboxEventArchiveEntityFor } from '../../src/store/typeorm/outboxArchiveEntities';
import { DB_URL } from '../helpers/env';
import { TEST_DATABASE, ensureSchema, openDataSource } from '../helpers/db';
import { cleanUp, unique } from './support';

/**
 * The SDK's schema on the database ROCKETMQ_TX_DB_URL names: the migrations create it, the
 * entities of that database register on a DataSource of its type and agree with what the
 * migrations created (synchronize would change nothing), and values round-trip exactly.
 */
describe(`schema (${TEST_DATABASE})`, () => {
  let ds: DataSource;

  beforeAll(async () => {
    ds = await openDataSource();
    await ensureSchema(ds);
  });

  afterAll(async () => {
    if (ds) await cleanUp(ds);
    await ds?.destroy();
  });

  it('the entities of the database agree with what the migrations created', async () => {
    // MariaDB read as type 'mysql' makes TypeORM misread NULL defaults: use the type a MariaDB
    // user is told to use. PostgreSQL and MySQL are read as themselves.
    const version: Array<{ v: string }> = await ds.query('SELECT VERSION() AS v');
    const type =
      TEST_DATABASE === 'postgres' ? 'postgres' : /mariadb/i.test(version[0]!.v) ? 'mariadb' : 'mysql';
    const checker = new DataSource({
      type,
      url: DB_URL,
      entities: [...rocketMqTxEntitiesFor(type)],
      migrations: [...rocketMqTxMigrations, ...rocketMqTxArchiveMigrations],
      migrationsTableName: 'rocketmq_tx_migrations',
      logging: false,
    } as ConstructorParameters<typeof DataSource>[0]);
    await checker.initialize();
    try {
      const pending = await checker.driver.createSchemaBuilder().log();
      expect(pending.upQueries.map((q) => q.query)).toEqual([]);
    } finally {
      await checker.destroy();
    }
  });

  it('the same entity instances on every call, and one set per database', () => {
    expect(rocketMqTxEntitiesFor(TEST_DATABASE)).toEqual(rocketMqTxEntitiesFor(TEST_DATABASE));
    expect(rocketMqTxEntitiesFor('mariadb')[0]).toBe(rocketMqTxEntitiesFor('mysql')[0]);
    expect(rocketMqTxEntitiesFor('postgres')[0]).not.toBe(rocketMqTxEntitiesFor('mysql')[0]);
    expect(outboxEventArchiveEntityFor('postgres')).toBe(outboxEventArchiveEntityFor('postgres'));
  });

  it('millisecond timestamps and binary bodies round-trip through the entities', async () => {
    const name = unique('schema');
    const txId = uuidv7();
    const eventId = uuidv7();
    const occurredAt = new Date('2026-01-02T03:04:05.678Z');
    const body = Buffer.from([0x00, 0xff, 0x7f, 0x80, 0x0a, 0x27, 0x5c]);
    await ds.getRepository('TxRecord').insert({
      txId,
      status: 'COMMITTED',
      resolvedBy: 'PRODUCER',
      producerGroup: name,
      topic: name,
      eventCount: 1,
    });
    await ds.getRepository('OutboxEvent').insert({
      eventId,
      txId,
      topic: name,
      keys: '[]',
      properties: '{}',
      payload: body,
      occurredAt,
      status: 'SENT',
      nextAttemptAt: occurredAt,
    });
    const tx = await ds.getRepository('TxRecord').findOneByOrFail({ txId });
    expect(tx.createdAt).toBeInstanceOf(Date);
    expect(tx.confirmedAt).toBeNull();
    const event = await ds.getRepository('OutboxEvent').findOneByOrFail({ eventId });
    expect(Buffer.compare(Buffer.from(event.payload as Buffer), body)).toBe(0);
    expect((event.occurredAt as Date).toISOString()).toBe(occurredAt.toISOString());
    expect(event.attempts).toBe(0);
  });

  it('one row per (aggregate type, id, version), NULL aggregates never collide', async () => {
    const txId = uuidv7();
    const topic = unique('schema');
    const repo = ds.getRepository('OutboxEvent');
    const row = (eventId: string, aggregate: boolean) => ({
      eventId,
      txId,
      topic,
      keys: '[]',
      properties: '{}',
      payload: Buffer.from('{}'),
      occurredAt: new Date(),
      status: 'SENT',
      nextAttemptAt: new Date(),
      ...(aggregate ? { aggregateType: 'Order', aggregateId: txId, aggregateVersion: 1 } : {}),
    });
    await repo.insert(row(uuidv7(), false));
    await repo.insert(row(uuidv7(), false));
    await repo.insert(row(uuidv7(), true));
    const duplicate = await repo.insert(row(uuidv7(), true)).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(classifyAny(duplicate)).toBe('DUPLICATE_KEY');
  });
});
