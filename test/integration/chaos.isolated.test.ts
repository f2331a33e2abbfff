/**
 * Issue 19: `rocketmq-tx chaos` on the order-service sample. Its own broker (port offset
 * ROCKETMQ_TX_CHAOS_PORT_OFFSET, default 1900; check-back after 1 s, every 2 s, 5 checks), the
 * order service's processes SIGKILLed at random and in each named window, a survivor answering
 * check-backs (and republishing what the broker discarded): nothing committed lost, nothing
 * rolled back delivered, every window reached. Kills: CHAOS_TEST_KILLS, default 60 (12 per
 * window; about 4 minutes here with the consumer kills, each kill forks a fresh process) and 20 consumer kills, sized with
 * the rest of `npm test` under CI's 30 minutes; a fixed seed, CHAOS_TEST_SEED, so a failure can be
 * replayed. Larger runs: CHAOS_TEST_KILLS=1000, or `rocketmq-tx chaos --rounds <n>` against any broker
 * (docs/testing.md).
 */
import * as path from 'node:path';
import {
  formatChaosReport,
  formatConsumerChaosReport,
  runConsumerChaos,
  runProducerChaos,
} from '../../src/testing';
import { CHAOS_SKU } from '../../samples/order-service/chaos-consumer-target';
import { DEFAULT_DB_URL, openDatabase, select } from '../../samples/order-service/database';
import { withEnv } from '../helpers/withEnv';
import * as rocketmq from '../../scripts/rocketmq';

const KILLS = Number(process.env.CHAOS_TEST_KILLS ?? 60);
const SEED = Number(process.env.CHAOS_TEST_SEED ?? 19);
const CONSUMER_KILLS = Number(process.env.CHAOS_TEST_CONSUMER_KILLS ?? 20);
const REPO = path.resolve(__dirname, '../..');
const BROKER_ENV: Record<string, string> = {
  ROCKETMQ_TX_PORT_OFFSET: process.env.ROCKETMQ_TX_CHAOS_PORT_OFFSET || '1900',
  ROCKETMQ_TX_HOME: process.env.ROCKETMQ_TX_CHAOS_HOME || path.join(REPO, '.rocketmq-chaos'),
};
const withBrokerEnv = <T>(fn: () => Promise<T>): Promise<T> => withEnv(BROKER_ENV, fn);

describe('rocketmq-tx chaos on the order-service sample', () => {
  let endpoints: string;

  beforeAll(async () => {
    const started = await withBrokerEnv(() => rocketmq.start({ quiet: true, timeoutMs: 240_000 }));
    endpoints = started.endpoints;
  }, 300_000);

  afterAll(async () => {
    await withBrokerEnv(() => rocketmq.stop({ quiet: true }));
  }, 60_000);

  it(
    `${KILLS} kills in every window: nothing lost, nothing phantom`,
    async () => {
      const report = await runProducerChaos({
        module: path.join(REPO, 'samples/order-service/chaos-target.ts'),
        endpoints,
        topic: 'rmqtx_tx_21',
        rounds: KILLS,
        seed: SEED,
        parallel: 4,
        randomDelayMs: [100, 1500],
        windowTimeoutMs: 15_000,
        // Broker: transactionTimeOut 1 s + 5 checks x 2 s.
        checkHorizonMs: 15_000,
        settleTimeoutMs: 90_000,
        onProgress: (line) => console.log(line),
      });
      console.log(formatChaosReport(report));
      expect(report.failures).toEqual([]);
      expect(report.total.kills).toBe(KILLS);
      expect(report.total.committedEvents).toBeGreaterThan(0);
      expect(report.total.lost).toBe(0);
      expect(report.total.phantom).toBe(0);
      // Every named window was reached at least once (a runner that never gets there proves nothing).
      for (const w of report.windows)
        expect({ window: w.window, reached: w.reached > 0 }).toEqual({ window: w.window, reached: true });
    },
    Math.max(900_000, KILLS * 30_000 + 300_000),
  );

  it(
    `${CONSUMER_KILLS} consumer kills (random, in the handler, before the ack): every event applied exactly once`,
    async () => {
      const ds = await openDatabase(process.env.ROCKETMQ_TX_DB_URL ?? DEFAULT_DB_URL, { poolSize: 2 });
      // The stock counter and the reservations change in one transaction: their totals move together.
      const totals = async () => {
        const [stock] = await select<{ reserved: unknown }>(
          ds,
          'SELECT reserved FROM inventory_stock WHERE sku = ?',
          [CHAOS_SKU],
        );
        const [res] = await select<{ q: unknown }>(
          ds,
          "SELECT COALESCE(SUM(qty), 0) AS q FROM inventory_reservation WHERE sku = ? AND status = 'RESERVED'",
          [CHAOS_SKU],
        );
        return { reserved: Number(stock?.reserved ?? 0), reservations: Number(res?.q ?? 0) };
      };
      try {
        const report = await runConsumerChaos({
          module: path.join(REPO, 'samples/order-service/chaos-consumer-target.ts'),
          endpoints,
          topic: 'rmqtx_tx_22',
          rounds: CONSUMER_KILLS,
          seed: SEED,
          parallel: 2,
          eventsPerRound: 5,
          randomDelayMs: [500, 3000],
          windowTimeoutMs: 20_000,
          settleTimeoutMs: 90_000,
          onProgress: (line) => console.log(line),
        });
        console.log(formatConsumerChaosReport(report));
        expect(report.failures).toEqual([]);
        expect(report.published).toBe(CONSUMER_KILLS * 5);
        expect(report).toMatchObject({ lost: 0, appliedTwice: 0, appliedOnce: report.published });
        // Most messages held at a kill came back, so a second application would have shown. (The
        // broker's revive can drop one: in one CI run 1 of 13 never came back in 90 s.)
        expect(report.heldAtKill).toBeGreaterThan(0);
        expect(report.notRedelivered).toBeLessThanOrEqual(Math.floor(report.heldAtKill / 10));
        for (const w of report.windows)
          expect({ window: w.window, reached: w.reached > 0 }).toEqual({ window: w.window, reached: true });
        const after = await totals();
        expect(after.reserved).toBe(after.reservations);
      } finally {
        await ds.destroy();
      }
    },
    Math.max(600_000, CONSUMER_KILLS * 30_000 + 300_000),
  );

  it('the consumer runner catches a handler that is not idempotent (effect written outside the transaction)', async () => {
    const report = await runConsumerChaos({
      module: path.join(REPO, 'test/helpers/chaos-consumer-broken-target.ts'),
      endpoints,
      topic: 'rmqtx_tx_22',
      rounds: 2,
      seed: SEED,
      windows: ['in-handler'],
      parallel: 1,
      eventsPerRound: 3,
      windowTimeoutMs: 20_000,
      settleTimeoutMs: 60_000,
      onProgress: (line) => console.log(line),
    });
    console.log(formatConsumerChaosReport(report));
    expect(report.windows).toEqual([{ window: 'in-handler', kills: 2, reached: 2 }]);
    expect(report.ok).toBe(false);
    // Each reached in-handler kill leaves one event's effect written twice once it is redelivered;
    // two kills can land on the same event (its redelivery reached the second process first when
    // that process started after the message's invisibility ended), which counts as one event.
    expect(report.appliedTwice).toBeGreaterThanOrEqual(1);
    expect(report.lost).toBe(0);
    // The runner kept its survivor until both killed processes' events came back.
    expect(report.notRedelivered).toBe(0);
    expect(report.failures.join('; ')).toMatch(/applied more than once/);
  }, 300_000);
});
