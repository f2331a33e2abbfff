/**
 * Issue 20: the guarantee with producers alone (no relay). Instances of one producerGroup are
 * SIGKILLed at random under transactional load; one survivor answers check-backs and runs the
 * built-in discard recovery; a raw consumer collects everything. Nothing committed may be lost,
 * nothing rolled back delivered; duplicates are counted and printed (same eventId, at least once).
 * Isolated project: it loads the shared broker, and starts a second one with checkMax = 1.
 * The database is ROCKETMQ_TX_DB_URL's (MariaDB or PostgreSQL; the instances inherit it):
 * scripts/test-all.js runs the check-max-5 case a second time on PostgreSQL with fewer kills.
 */
import * as path from 'node:path';
import { TEST_DATABASE } from '../helpers/db';
import { ENDPOINTS } from '../helpers/env';
import { runKillScenario, type KillReport } from '../helpers/killScenario';

import { withEnv } from '../helpers/withEnv';

import * as rocketmq from '../../scripts/rocketmq';

const KILLS = Number(process.env.KILL_TEST_KILLS ?? 8);
const LOW_MAX_KILLS = Number(process.env.KILL_TEST_LOW_MAX_KILLS ?? 6);
const REPO = path.resolve(__dirname, '../..');
const LOW_MAX_ENV: Record<string, string> = {
  ROCKETMQ_TX_PORT_OFFSET: process.env.ROCKETMQ_TX_CHECKMAX_PORT_OFFSET || '700',
  ROCKETMQ_TX_HOME: process.env.ROCKETMQ_TX_CHECKMAX_HOME || path.join(REPO, '.rocketmq-checkmax'),
  ROCKETMQ_TX_CHECK_MAX: '1',
};

function print(title: string, r: KillReport): void {
  console.log(
    `${title} (${TEST_DATABASE}): ${r.kills} kills, ${r.committedEvents} committed events (${r.committedTransactions} tx), ` +
      `lost ${r.lost}, phantom ${r.phantom}, duplicates ${r.duplicates} ` +
      `(${((100 * r.duplicates) / Math.max(1, r.committedEvents)).toFixed(2)} %, ` +
      `${(r.duplicates / Math.max(1, r.kills)).toFixed(1)} per kill: broker ${r.brokerDuplicates}, ` +
      `republish ${r.republishDuplicates}), survivor republished ${r.survivorRepublished}, ` +
      `survivor check-backs ${JSON.stringify(r.survivorCheckBacks)}, settled in ${r.settleMs} ms`,
  );
}

const withLowMaxEnv = <T>(fn: () => Promise<T>): Promise<T> => withEnv(LOW_MAX_ENV, fn);

describe('producers only, instances SIGKILLed at random: nothing lost, nothing invented', () => {
  it(`test broker timing (check max 5): ${KILLS} kills`, async () => {
    const r = await runKillScenario({
      endpoints: ENDPOINTS,
      topic: 'rmqtx_tx_21',
      kills: KILLS,
      // Broker: transactionTimeOut 1 s + 5 checks x 2 s; the recovery republishes after 20 s.
      recoveryHorizonMs: 20_000,
      brokerHorizonMs: 15_000,
      settleTimeoutMs: 150_000,
      log: (line) => console.log(line),
    });
    print('check max 5', r);
    expect(r.committedEvents).toBeGreaterThan(0);
    expect(r.deliveredEvents).toBe(r.committedEvents);
    expect(r.lost).toBe(0);
    expect(r.phantom).toBe(0);
  }, 600_000);

  describe('a broker whose check maximum is 1 (half messages discarded after one check)', () => {
    let endpoints: string;

    beforeAll(async () => {
      const started = await withLowMaxEnv(() => rocketmq.start({ quiet: true, timeoutMs: 240_000 }));
      console.log(`check-max-1 broker ready in ${((started.ms ?? 0) / 1000).toFixed(1)} s`);
      endpoints = started.endpoints;
    }, 300_000);

    afterAll(async () => {
      await withLowMaxEnv(() => rocketmq.stop({ quiet: true }));
    }, 60_000);

    it(`${LOW_MAX_KILLS} kills: every discarded committed event is republished by the producers`, async () => {
      const r = await runKillScenario({
        endpoints,
        topic: 'rmqtx_tx_22',
        kills: LOW_MAX_KILLS,
        // Broker: transactionTimeOut 1 s + 1 check x 2 s; the recovery republishes after 8 s.
        recoveryHorizonMs: 8_000,
        brokerHorizonMs: 6_000,
        settleTimeoutMs: 120_000,
        log: (line) => console.log(line),
      });
      print('check max 1', r);
      expect(r.committedEvents).toBeGreaterThan(0);
      expect(r.lost).toBe(0);
      expect(r.phantom).toBe(0);
    }, 600_000);
  });
});
