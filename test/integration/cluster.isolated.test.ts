/**
 * Issue 16: a real RocketMQ cluster from the project's own scripts (ROCKETMQ_TX_CLUSTER=2: a
 * NameServer, brokers broker-a and broker-b, each a master with its own store, and a proxy in
 * Cluster mode), on ROCKETMQ_TX_CLUSTER_PORT_OFFSET (default 2500) and <repo>/.rocketmq-cluster-test.
 * Broker timing as the test broker's: check-back after 1 s, every 2 s, 5 checks.
 *
 * - Sends from the SDK land on both brokers and on more than one queue of each.
 * - A broker SIGKILLed under transactional load from three producer processes of one
 *   producerGroup (themselves SIGKILLed at random too), then restarted: every committed event
 *   delivered, none of a rolled-back transaction; the half messages the dead broker held are
 *   resolved by the surviving instances after it returns (or republished by their discard
 *   recovery).
 * - The proxy SIGKILLed and restarted mid-load: the same.
 * - Another service publishing the same topic is asked about a service's half messages (while
 *   that service, which answers UNKNOWN, is up too): it
 *   answers UNKNOWN (wrong-service guard), never fences; the broker discards them after its
 *   check maximum, the relay republishes them and an IdempotentConsumer applies each once.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  IdempotentConsumer,
  TransactionResolution,
  runDoctor,
  defineEvent,
  on,
  uuidv7,
  type CheckBackOutcome,
} from '../../src';
import { ensureSchema, openDataSource, txRecord } from '../helpers/db';
import { waitFor } from '../helpers/env';
import { runKillScenario, type KillReport, type KillScenarioOptions } from '../helpers/killScenario';
import { makeProducer } from '../helpers/producer';
import { makeRelay } from '../helpers/relay';
import { withEnv } from '../helpers/withEnv';

import * as rocketmq from '../../scripts/rocketmq';

const REPO = path.resolve(__dirname, '../..');
const CLUSTER_ENV: Record<string, string> = {
  ROCKETMQ_TX_CLUSTER: '2',
  ROCKETMQ_TX_PORT_OFFSET: process.env.ROCKETMQ_TX_CLUSTER_PORT_OFFSET || '2500',
  ROCKETMQ_TX_HOME: process.env.ROCKETMQ_TX_CLUSTER_HOME || path.join(REPO, '.rocketmq-cluster-test'),
};
const inCluster = <T>(fn: () => Promise<T>): Promise<T> => withEnv(CLUSTER_ENV, fn);
const KILLS = Number(process.env.CLUSTER_TEST_KILLS ?? 3);

const ClusterItem = defineEvent<{ n: number }>({
  eventType: 'ClusterItem',
  eventVersion: 1,
  aggregateType: 'Cart',
});

function tally(outcomes: readonly CheckBackOutcome[]): Record<string, number> {
  const t: Record<string, number> = {};
  for (const o of outcomes)
    t[`${o.resolution}/${o.decidedBy}`] = (t[`${o.resolution}/${o.decidedBy}`] ?? 0) + 1;
  return t;
}

function print(title: string, r: KillReport): void {
  console.log(
    `${title}: ${r.kills} producer kills, ${r.committedEvents} committed events (${r.committedTransactions} tx, ` +
      `${r.rolledBackTransactions} rolled back), lost ${r.lost}, phantom ${r.phantom}, duplicates ${r.duplicates} ` +
      `(broker ${r.brokerDuplicates}, republish ${r.republishDuplicates}), survivor republished ${r.survivorRepublished}, ` +
      `survivor check-backs ${JSON.stringify(r.survivorCheckBacks)}, settled in ${r.settleMs} ms`,
  );
}

describe('a two-broker cluster behind a Cluster-mode proxy', () => {
  let endpoints: string;

  beforeAll(async () => {
    // A fresh store: the collectors are new consumer groups that read each queue from its start,
    // and a backlog of earlier runs (the home is kept for its jars) would only slow them down.
    await inCluster(() => rocketmq.stop({ quiet: true }));
    fs.rmSync(path.join(CLUSTER_ENV.ROCKETMQ_TX_HOME!, 'store'), { recursive: true, force: true });
    const started = await inCluster(() => rocketmq.start({ quiet: true, timeoutMs: 300_000 }));
    expect(started.mode).toBe('cluster');
    expect(started.brokers?.map((b) => b.name)).toEqual(['broker-a', 'broker-b']);
    console.log(
      `cluster ready in ${((started.ms ?? 0) / 1000).toFixed(1)} s: ${JSON.stringify(started.brokers)}`,
    );
    endpoints = started.endpoints;
  }, 360_000);

  afterAll(async () => {
    await inCluster(() => rocketmq.stop({ quiet: true }));
  }, 120_000);

  it('transactional sends land on both brokers and on more than one queue of each', async () => {
    const topic = 'rmqtx_tx_21';
    const before = await inCluster(() => rocketmq.topicStatus(topic));
    const ds = await openDataSource();
    await ensureSchema(ds);
    const producer = makeProducer(ds, {
      endpoints,
      topics: [topic],
      producerGroup: `cluster_spread_${uuidv7()}`,
    });
    try {
      await producer.start();
      for (let i = 0; i < 40; i++) {
        await producer.transact({ topic, body: { i } }, async () => undefined);
      }
    } finally {
      await producer.shutdown();
      await ds.destroy();
    }
    const after = await inCluster(() => rocketmq.topicStatus(topic));
    const grew = after.filter((q) => {
      const b = before.find((x) => x.broker === q.broker && x.queueId === q.queueId);
      return q.maxOffset > (b?.maxOffset ?? 0);
    });
    const perBroker = new Map<string, number>();
    for (const q of grew) perBroker.set(q.broker, (perBroker.get(q.broker) ?? 0) + 1);
    console.log(
      `40 transactions: queues written per broker ${JSON.stringify(Object.fromEntries(perBroker))}`,
    );
    expect([...perBroker.keys()].sort()).toEqual(['broker-a', 'broker-b']);
    for (const n of perBroker.values()) expect(n).toBeGreaterThan(1);
  }, 120_000);

  it("doctor: a transactional topic on both brokers warns about confirmBy 'endTransaction', passes with 'delivery'", async () => {
    const topic = 'rmqtx_tx_21';
    const run = (confirmBy: 'endTransaction' | 'delivery') =>
      runDoctor({ broker: { endpoints }, transactionTopics: [topic], confirmBy });
    const warned = (await run('endTransaction')).checks.find((c) => c.id === 'broker.confirmBy');
    expect(warned).toMatchObject({
      status: 'warn',
      value: `transactional topics on several brokers: ${topic} (broker-a, broker-b); confirmBy endTransaction`,
    });
    const passed = (await run('delivery')).checks.find((c) => c.id === 'broker.confirmBy');
    expect(passed?.status).toBe('pass');
  }, 60_000);

  /** The kill scenario on the cluster with a fault injected after some kills: every committed event delivered, nothing invented. */
  async function faultUnderLoad(
    title: string,
    o: Pick<KillScenarioOptions, 'topic' | 'kills' | 'confirmBy' | 'afterKill'>,
  ): Promise<void> {
    const r = await runKillScenario({
      endpoints,
      recoveryHorizonMs: 20_000,
      brokerHorizonMs: 15_000,
      settleTimeoutMs: 150_000,
      log: (line) => console.log(line),
      ...o,
    });
    print(title, r);
    expect(r.committedEvents).toBeGreaterThan(0);
    expect(r.deliveredEvents).toBe(r.committedEvents);
    expect(r.lost).toBe(0);
    expect(r.phantom).toBe(0);
  }

  /** Kills (SIGKILL) or brings back a cluster component, printing how long it took. */
  async function kill(component: 'broker-b' | 'proxy'): Promise<void> {
    await inCluster(() => rocketmq.stop({ quiet: true, components: [component], signal: 'SIGKILL' }));
    console.log(`[cluster] ${component} SIGKILLed`);
  }
  async function bringBack(component: string): Promise<void> {
    const s = await inCluster(() => rocketmq.start({ quiet: true, timeoutMs: 180_000 }));
    console.log(`[cluster] ${component} back in ${((s.ms ?? 0) / 1000).toFixed(1)} s`);
  }

  it("another service's half messages: the other service on the topic answers UNKNOWN, never fences; discarded after the check maximum, the relay republishes them and an IdempotentConsumer applies each once", async () => {
    const topic = 'rmqtx_tx_20';
    const run = Date.now().toString(36);
    const tag = `run_${run}`;
    const ds = await openDataSource({ poolSize: 12 });
    await ensureSchema(ds);
    const outcomesB: CheckBackOutcome[] = [];
    // Service B publishes the same topic and runs throughout: the proxy may ask it about A's halves.
    const b = makeProducer(ds, {
      endpoints,
      topics: [topic],
      producerGroup: `cluster_svc_b_${run}`,
      checkBack: { onResolved: (o) => outcomesB.push(o) },
    });
    // Service A: its transactions commit, their EndTransaction is lost and A answers its checks
    // UNKNOWN: nobody decides its half messages, the broker discards them. A stays up until B
    // has been asked (a client that just shut down can keep its place at the proxy for a while,
    // and checks sent there are lost: B might never be asked), then goes.
    const a = makeProducer(
      ds,
      {
        endpoints,
        topics: [topic],
        producerGroup: `cluster_svc_a_${run}`,
        discardRecovery: false,
        checkBack: { resolverScope: 'all', resolver: { resolve: async () => TransactionResolution.UNKNOWN } },
      },
      {
        beforeEnd: async () => {
          throw new Error('EndTransaction dropped by the test');
        },
      },
    );
    const applied: string[] = [];
    const consumer = new IdempotentConsumer({
      endpoints,
      dataSource: ds,
      consumerGroup: `cluster_inbox_${run}`,
      subscriptions: [{ topic, tag }],
      handlers: [on(ClusterItem, async (event) => void applied.push(event.eventId))],
      startTimeoutMs: 30_000,
    });
    const { relay } = makeRelay(
      ds,
      {
        endpoints,
        topics: [topic],
        transactionTopics: [topic],
        discardHorizonMs: 15_000,
        reconcileIntervalMs: 500,
      },
      // The relay reads no tx_record here (answers UNKNOWN), so the broker really discards.
      { checkBackUnknown: true },
    );
    try {
      await Promise.all([b.start(), a.start(), consumer.start()]);
      const txIds: string[] = [];
      const eventIds: string[] = [];
      for (let v = 1; v <= 5; v++) {
        const event = ClusterItem.create({ aggregateId: `cart-${run}`, aggregateVersion: v, data: { n: v } });
        const r = await a.transact({ topic, event, tag }, async () => undefined);
        txIds.push(r.txId);
        eventIds.push(...r.eventIds);
      }
      const aboutA = () => outcomesB.filter((o) => o.txId !== undefined && txIds.includes(o.txId));
      await waitFor(() => aboutA().length >= 1, {
        timeoutMs: 60_000,
        description: "service B asked about one of A's half messages",
      });
      await a.shutdown();
      await relay.start();
      await waitFor(() => eventIds.every((id) => applied.includes(id)), {
        timeoutMs: 120_000,
        description: 'every discarded event republished by the relay and applied',
      });
      // A marker published after them through the relay: once it is applied, a second copy of
      // any earlier event would have been delivered too.
      const marker = ClusterItem.create({ aggregateId: `cart-${run}`, aggregateVersion: 6, data: { n: 6 } });
      const m = await b.transact({ topic, event: marker, tag }, async () => undefined, {
        delivery: 'outbox',
      });
      await waitFor(() => applied.includes(m.eventIds[0]!), {
        timeoutMs: 60_000,
        description: 'marker applied',
      });
      console.log(
        `other service + discarding broker: B answered ${aboutA().length} checks about A's ${txIds.length} ` +
          `transactions (${JSON.stringify(tally(aboutA()))}); relay republished ${relay.stats.republished}; ` +
          `consumer applied ${applied.length}, stats ${JSON.stringify(consumer.stats)}`,
      );
      expect(aboutA().every((o) => o.resolution === 'UNKNOWN' && o.decidedBy === 'foreign_origin')).toBe(
        true,
      );
      for (const txId of txIds)
        expect(await txRecord(ds, txId)).toMatchObject({ status: 'COMMITTED', resolved_by: 'PRODUCER' });
      for (const id of eventIds) expect(applied.filter((x) => x === id)).toHaveLength(1);
      expect(relay.stats.republished).toBeGreaterThanOrEqual(eventIds.length);
    } finally {
      await relay.shutdown().catch(() => undefined);
      await consumer.shutdown().catch(() => undefined);
      await a.shutdown().catch(() => undefined);
      await b.shutdown().catch(() => undefined);
      await ds.destroy();
    }
  }, 300_000);

  it(`broker-b SIGKILLed under load from three producer processes (confirmBy 'delivery'), then restarted (${KILLS} producer kills): nothing lost, nothing invented`, async () => {
    await faultUnderLoad('broker-b killed', {
      topic: 'rmqtx_tx_22',
      kills: KILLS,
      confirmBy: 'delivery',
      afterKill: async (kills) => {
        if (kills === 1) await kill('broker-b');
        else if (kills === 2) await bringBack('broker-b');
      },
    });
  }, 600_000);

  // confirmBy 'delivery', as docs/cluster.md prescribes for a Cluster-mode proxy: the proxy answers
  // a commit OK once its one-way request to the broker is written; killed at that moment, the
  // commit dies with it, and the half's checks while the proxy is down reach nobody. With the
  // default confirmBy this run once lost 1 of 1,037 committed events (confirmed, discarded).
  it("the proxy SIGKILLed and restarted mid-load (confirmBy 'delivery', 2 producer kills): nothing lost, nothing invented", async () => {
    await faultUnderLoad('proxy killed', {
      topic: 'rmqtx_tx_23',
      kills: 2,
      confirmBy: 'delivery',
      afterKill: async (kills) => {
        if (kills === 1) {
          await kill('proxy');
          await bringBack('proxy');
        }
      },
    });
  }, 600_000);
});
