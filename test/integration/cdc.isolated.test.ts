/**
 * Issue 17: delivery 'cdc' end to end on the real parts, on both databases: a MariaDB with the
 * binlog on (scripts/mariadb-binlog.js, port 3307) and a PostgreSQL with wal_level=logical
 * (scripts/postgres-logical.js, port 5433), the real Debezium embedded engine assembled from Maven
 * Central by the same code `rocketmq-tx cdc` runs (src/cdc/engine.ts, planned by the CLI's flag
 * parser), the shared local RocketMQ broker, and a raw consumer: every committed CDC event
 * delivered with the message the relay would send, none of a rolled-back transaction, relay rows
 * never sent by the engine, and the engine SIGKILLed mid-stream loses nothing.
 */
import 'reflect-metadata';
import * as path from 'node:path';
import { DataSource } from 'typeorm';
import { rocketMqTxEntitiesFor, rocketMqTxMigrations, TransactionalProducer } from '../../src';
import { assembleEngine, CdcEngineSupervisor } from '../../src/cdc/engine';
import { planCdc } from '../../src/cli/cdc';
import { parseFlags } from '../../src/cli/args';
import { cdcFlags } from '../../src/cli/cdc';
import { main } from '../../src/cli/main';
import { readCdcBacklog } from '../../src/store/typeorm/cdcQueries';
import { Collector } from '../helpers/collector';
import { ENDPOINTS, waitFor } from '../helpers/env';
import { sql, type TestDatabase } from '../helpers/db';
import * as binlogDb from '../../scripts/mariadb-binlog';
import * as logicalDb from '../../scripts/postgres-logical';

const REPO = path.resolve(__dirname, '../..');
const NAMESRV =
  process.env.ROCKETMQ_NAMESRV ?? `127.0.0.1:${9876 + Number(process.env.ROCKETMQ_TX_PORT_OFFSET || 0)}`;
const CDC_HOME = process.env.ROCKETMQ_TX_CDC_HOME ?? path.join(REPO, '.rocketmq-tx-cdc');

const DATABASES: {
  label: string;
  type: TestDatabase;
  topic: string;
  start: () => Promise<{ url: string }>;
}[] = [
  {
    label: 'MariaDB binlog',
    type: 'mysql',
    topic: 'rmqtx_normal_12',
    start: () => binlogDb.start({ quiet: true }),
  },
  {
    label: 'PostgreSQL logical decoding',
    type: 'postgres',
    topic: 'rmqtx_normal_7',
    start: () => logicalDb.start({ quiet: true }),
  },
];

describe.each(DATABASES)(
  "delivery 'cdc' on $label: the Debezium engine publishes outbox rows",
  ({ type, topic: TOPIC, start }) => {
    let ds: DataSource;
    let url: string;
    let producer: TransactionalProducer;
    let collector: Collector;
    let supervisor: CdcEngineSupervisor;
    let running: Promise<void>;
    const notices: string[] = [];

    beforeAll(async () => {
      url = (await start()).url;
      ds = new DataSource({
        type,
        url,
        entities: rocketMqTxEntitiesFor(type),
        migrations: rocketMqTxMigrations,
        migrationsTableName: 'rocketmq_tx_migrations',
      });
      await ds.initialize();
      await ds.runMigrations();
      await ds.query('CREATE TABLE IF NOT EXISTS cdc_order (id VARCHAR(64) PRIMARY KEY, total INT NOT NULL)');
      collector = new Collector(TOPIC);
      await collector.start();
      producer = new TransactionalProducer({
        endpoints: ENDPOINTS,
        dataSource: ds,
        producerGroup: `rmqtx_cdc_${process.pid}`,
        topics: [TOPIC],
        delivery: 'cdc',
      });
      await producer.start();
      // A fresh engine name per run: no stored offset, so the default snapshot mode (when_needed)
      // first reads the CDC rows already in the table, then streams the binlog from there.
      const name = `rmqtx-cdc-test-${Date.now().toString(36)}`;
      const { flags } = parseFlags(cdcFlags, [
        '--db-url',
        url,
        '--namesrv',
        NAMESRV,
        '--home',
        CDC_HOME,
        '--name',
        name,
      ]);
      const plan = planCdc(flags, {}, REPO);
      const classpath = await assembleEngine(plan.home, (line) => console.log(line));
      supervisor = new CdcEngineSupervisor(plan, classpath, { onNotice: (line) => notices.push(line) });
      running = supervisor.run();
      await waitFor(() => supervisor.current.running, {
        timeoutMs: 120_000,
        description: 'the engine running',
      });
    }, 300_000);

    afterAll(async () => {
      supervisor?.stop();
      await running;
      await producer?.shutdown();
      await collector?.stop();
      await ds?.destroy();
    }, 60_000);

    const order = (id: string, total: number) => ({
      topic: TOPIC,
      tag: 'cdc',
      keys: [id],
      properties: { ORDER_ID: id },
      body: { id, total },
    });

    const commit = async (id: string, total = 1) => {
      const r = await producer.transact(order(id, total), async (manager) => {
        await manager.query(sql('INSERT INTO cdc_order (id, total) VALUES (?, ?)', type), [id, total]);
      });
      expect(r.delivery).toBe('cdc');
      return r.eventIds[0]!;
    };

    const receivedIds = () => new Set(collector.received.map((m) => m.properties.EVENT_ID));
    const statusOf = async (eventId: string): Promise<string | undefined> => {
      const rows = (await ds.query(sql('SELECT status FROM outbox_event WHERE event_id = ?', type), [
        eventId,
      ])) as { status: string }[];
      return rows[0]?.status;
    };

    it('every committed event arrives with the message the relay would send; none of a rolled-back transaction', async () => {
      const run = `a${Date.now().toString(36)}`;
      const committed: string[] = [];
      for (let i = 0; i < 20; i++) committed.push(await commit(`${run}-${i}`, i));
      const rolledBack: string[] = [];
      for (let i = 0; i < 5; i++) {
        await expect(
          producer.transact(order(`${run}-rb-${i}`, i), async (_m, { eventIds }) => {
            rolledBack.push(eventIds[0]!);
            throw new Error('business rule says no');
          }),
        ).rejects.toThrow('business rule says no');
      }
      // A CDC event committed after the rolled-back ones: once it is here, they had their chance.
      const last = await commit(`${run}-last`);
      await waitFor(() => [...committed, last].every((id) => receivedIds().has(id)), {
        timeoutMs: 60_000,
        description: 'all committed CDC events on the topic',
      });
      const ids = receivedIds();
      expect(rolledBack.filter((id) => ids.has(id))).toEqual([]);
      const m = collector.received.find((r) => r.properties.EVENT_ID === committed[3]);
      expect(m).toMatchObject({ tag: 'cdc', keys: expect.arrayContaining([`${run}-3`, committed[3]]) });
      expect(m!.properties).toMatchObject({ ORDER_ID: `${run}-3`, EVENT_ID: committed[3] });
      expect(m!.properties.TX_ID).toMatch(/^[0-9a-f-]{36}$/);
      expect(JSON.parse(m!.body)).toEqual({ id: `${run}-3`, total: 3 });
      // The rows stay CDC: no SENT write-back.
      expect(await statusOf(committed[3]!)).toBe('CDC');
    }, 120_000);

    it('a row for the relay (delivery outbox, NEW) is never sent by the engine', async () => {
      const run = `b${Date.now().toString(36)}`;
      const skippedBefore = supervisor.current.skipped;
      const relayRow = await producer.transact(order(`${run}-relay`, 1), async () => undefined, {
        delivery: 'outbox',
      });
      const after = await commit(`${run}-after`);
      await waitFor(() => receivedIds().has(after), {
        timeoutMs: 60_000,
        description: 'the CDC event after it',
      });
      expect(receivedIds().has(relayRow.eventIds[0]!)).toBe(false);
      await waitFor(() => supervisor.current.skipped > skippedBefore, {
        timeoutMs: 10_000,
        description: 'the engine counting the relay row as not its own',
      });
      expect(await statusOf(relayRow.eventIds[0]!)).toBe('NEW');
    }, 90_000);

    it('the engine SIGKILLed mid-stream: restarted from its stored offset, every committed event delivered', async () => {
      const run = `c${Date.now().toString(36)}`;
      const restartsBefore = supervisor.current.restarts;
      const publishedBefore = supervisor.current.published;
      const committed: string[] = [];
      let kills = 0;
      const writer = (async () => {
        for (let i = 0; i < 90; i++) committed.push(await commit(`${run}-${i}`, i));
      })();
      // Two kills while rows stream in: after some are published, and again after the restart.
      for (const threshold of [20, 50]) {
        await waitFor(
          () => supervisor.current.running && supervisor.current.published >= publishedBefore + threshold,
          {
            timeoutMs: 120_000,
            description: `${threshold} events published`,
          },
        );
        supervisor.kill();
        kills++;
        await waitFor(() => !supervisor.current.running, {
          timeoutMs: 10_000,
          description: 'the engine down',
        });
      }
      await writer;
      // The engine back after the last kill (it may have published everything before it).
      await waitFor(() => supervisor.current.running, { timeoutMs: 120_000, description: 'the engine back' });
      await waitFor(() => committed.every((id) => receivedIds().has(id)), {
        timeoutMs: 180_000,
        description: 'every committed event delivered after the kills',
      });
      const copies = collector.received.filter((m) => committed.includes(m.properties.EVENT_ID!)).length;
      console.log(
        `[cdc] ${kills} SIGKILLs: ${committed.length} committed, ${committed.length} delivered, lost 0, ` +
          `duplicates ${copies - committed.length}, engine restarts ${supervisor.current.restarts - restartsBefore}`,
      );
      expect(supervisor.current.restarts - restartsBefore).toBeGreaterThanOrEqual(kills);
      expect(notices.some((n) => n.includes('restarting'))).toBe(true);
    }, 400_000);

    it('the backlog (CDC lag) grows while the engine is down and drains after it is back', async () => {
      const run = `d${Date.now().toString(36)}`;
      await waitFor(async () => (await readCdcBacklog(ds, supervisor.current.lastEventId)).events === 0, {
        timeoutMs: 60_000,
        description: 'no backlog',
      });
      supervisor.kill();
      await waitFor(() => !supervisor.current.running, { timeoutMs: 10_000, description: 'the engine down' });
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await commit(`${run}-${i}`));
      const during = await readCdcBacklog(ds, supervisor.current.lastEventId);
      expect(during.events).toBeGreaterThanOrEqual(supervisor.current.running ? 0 : 5);
      await waitFor(() => ids.every((id) => receivedIds().has(id)), {
        timeoutMs: 120_000,
        description: 'the backlog delivered',
      });
      await waitFor(async () => (await readCdcBacklog(ds, supervisor.current.lastEventId)).events === 0, {
        timeoutMs: 30_000,
        description: 'the backlog drained',
      });
    }, 200_000);

    it('rocketmq-tx cdc and status --cdc-home: the CLI runs the engine, serves /metrics, stops on SIGTERM', async () => {
      // One engine at a time on this table: the supervisor above stops first.
      supervisor.stop();
      await running;
      const err: string[] = [];
      const out: string[] = [];
      const handlers: ((signal: string) => void)[] = [];
      const io = {
        stdout: { write: (t: string) => out.push(t) },
        stderr: { write: (t: string) => err.push(t) },
        env: {} as Record<string, string | undefined>,
      };
      const ctx = { io, onSignal: (h: (s: string) => void) => (handlers.push(h), () => undefined) };
      const name = `rmqtx-cdc-cli-${Date.now().toString(36)}`;
      const exit = main(
        [
          'cdc',
          '--db-url',
          url,
          '--namesrv',
          NAMESRV,
          '--home',
          CDC_HOME,
          '--name',
          name,
          '--metrics',
          '127.0.0.1:0',
          '--progress-interval',
          '2s',
          '--json',
        ],
        ctx,
      );
      const metricsAt = () => /metrics at (http:\S+)/.exec(err.join(''))?.[1];
      await waitFor(() => metricsAt() !== undefined, {
        timeoutMs: 60_000,
        description: 'the metrics endpoint',
      });
      const metricsUrl = metricsAt()!;
      await waitFor(() => err.join('').includes('running'), {
        timeoutMs: 120_000,
        description: 'the engine running',
      });
      const run = `e${Date.now().toString(36)}`;
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await commit(`${run}-${i}`));
      await waitFor(() => ids.every((id) => receivedIds().has(id)), {
        timeoutMs: 60_000,
        description: 'CLI-published events',
      });
      const sample = async (metric: string) => {
        const text = await (await fetch(metricsUrl)).text();
        const m = new RegExp(`^${metric}\\{engine="${name}"\\} (\\S+)$`, 'm').exec(text);
        return m ? Number(m[1]) : NaN;
      };
      await waitFor(async () => (await sample('rocketmq_tx_cdc_published_total')) >= 5, {
        timeoutMs: 30_000,
        description: 'published_total >= 5',
      });
      expect(await sample('rocketmq_tx_cdc_engine_up')).toBe(1);
      await waitFor(async () => (await sample('rocketmq_tx_cdc_lag_events')) === 0, {
        timeoutMs: 30_000,
        description: 'lag_events 0',
      });

      const statusOut: string[] = [];
      const statusCode = await main(['status', '--db-url', url, '--cdc-home', CDC_HOME, '--json'], {
        io: { ...io, stdout: { write: (t: string) => statusOut.push(t) } },
        onSignal: () => () => undefined,
      });
      expect(statusCode).toBe(0);
      const status = JSON.parse(statusOut.join('')) as {
        outbox: { byStatus: { CDC: number } };
        cdc: { name: string; published: number; behindEvents: number }[];
      };
      expect(status.outbox.byStatus.CDC).toBeGreaterThanOrEqual(5);
      expect(status.cdc.find((e) => e.name === name)).toMatchObject({
        behindEvents: 0,
        published: expect.any(Number),
      });

      for (const h of handlers) h('SIGTERM');
      expect(await exit).toBe(0);
      expect(err.join('')).toContain('cdc: stopped: published');
      expect(JSON.parse(out.join(''))).toMatchObject({ name, running: false });
    }, 300_000);
  },
);
