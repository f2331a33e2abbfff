/**
 * A check-back storm (issue 16): after a broker failover every in-doubt half message is checked
 * at once. N producer instances, each with its own connection pool shared with its business
 * traffic, receive M check-backs spread round-robin (the broker and the proxy pick channels in
 * turn) while every instance keeps writing producer transactions ("the producer flooded"). The
 * real fence (TxRecordResolver behind the CheckBackDispatcher) decides against the real database;
 * no broker is needed. Of the M transactions half committed (answer COMMIT), half never reached
 * the database (tombstone, ROLLBACK), and `--held` are still open in a producer transaction for
 * `--hold-ms` (default 6 for 3000 ms; the tombstone waits for the lock; past lockWaitTimeoutMs it answers UNKNOWN).
 * A check answered UNKNOWN or shed is asked again `--reask-ms` later (the broker's next check,
 * compressed); the run reports resolved/s, checks sent, lock waits, sheds, connections and the
 * business rate. `STORM_UNBATCHED=1`: the fence without its batching queue, for comparison.
 *
 *   ROCKETMQ_TX_DB_URL=mysql://root@127.0.0.1:3306/test node -r ts-node/register/transpile-only \
 *     bench/checkback-storm.ts [--checks=2000] [--held=6] [--hold-ms=3000] [--pool=10] [--flood=4] [--reask-ms=20]
 *
 * Sweeps instances {1, 3} x checkBack.concurrency {2, 4, 8, 16}; writes
 * bench/results/storm-<db>-<id>.md and .json. Uses the bench's scratch database (BENCH_DB).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  LOCK_WAIT_MS,
  MAX_QUEUED,
  storm,
  type StormOptions,
  type StormResult,
} from './phases/checkBackStorm';
import { BENCH_DATABASE, intArg, prepareBenchDatabase } from './lib/env';
import { fmt, markdownTable } from './lib/stats';
import { machineDescription } from './lib/system';

async function main(): Promise<void> {
  const o: StormOptions = {
    unbatched: Boolean(process.env.STORM_UNBATCHED),
    checks: intArg('checks', 2000),
    held: intArg('held', 6, 0),
    holdMs: intArg('hold-ms', 3000),
    pool: intArg('pool', 10),
    flood: intArg('flood', 4),
    reaskMs: intArg('reask-ms', 20),
  };
  const results: StormResult[] = [];
  // Each sizing twice: no producer transaction open (the fence's rate), then `held` open (what
  // a lock wait costs the other checks: on MySQL/MariaDB a check waiting on a row also holds back
  // inserts next to it, a gap lock).
  for (const n of [1, 3]) {
    for (const c of [2, 4, 8, 16]) {
      for (const held of o.held > 0 ? [0, o.held] : [0]) {
        await prepareBenchDatabase();
        const r = await storm(n, c, { ...o, held });
        results.push(r);
        console.log(
          `[storm] instances ${n} concurrency ${c} held ${held}: ${r.resolved}/${r.checks} resolved, ${fmt(r.resolvedPerSec, 0)}/s, ` +
            `${r.asks} checks (≤ ${r.maxAsks} per transaction), wrong ${r.wrong}, ` +
            `lock timeouts ${r.lockTimeouts}, shed ${r.shed}, connections ≤ ${r.maxConnections}, ` +
            `business ${fmt(r.businessTxPerSecBefore, 0)} → ${fmt(r.businessTxPerSecDuring, 0)} tx/s`,
        );
      }
    }
  }
  const id = `storm-${BENCH_DATABASE}-${Date.now().toString(36)}`;
  const table = markdownTable(
    [
      'instances',
      'checkBack.concurrency',
      'open producer tx',
      'resolved',
      'checks sent (max per tx)',
      'resolved/s',
      'check p99 ms',
      'lock timeouts',
      'shed',
      'DB connections (max)',
      'business tx/s before → during',
    ],
    results.map((r) => [
      String(r.instances),
      String(r.concurrency),
      String(r.held),
      `${r.resolved}/${r.checks}${r.wrong ? ` (${r.wrong} WRONG)` : ''}`,
      `${r.asks} (${r.maxAsks})`,
      fmt(r.resolvedPerSec, 0),
      fmt(r.checkMsP99, 0),
      String(r.lockTimeouts),
      String(r.shed),
      String(r.maxConnections),
      `${fmt(r.businessTxPerSecBefore, 0)} → ${fmt(r.businessTxPerSecDuring, 0)}`,
    ]),
  );
  const md =
    `## Check-back storm ${id}\n\n${machineDescription()}; database ${BENCH_DATABASE}.\n` +
    `Fence: ${process.env.STORM_UNBATCHED ? 'unbatched (STORM_UNBATCHED=1, one decision per check)' : "batched (the producer's default)"}. ` +
    `${o.checks} in-doubt transactions (half committed, the rest absent; each sizing once with none and once with ${o.held} of them still open in a producer transaction for ${o.holdMs} ms); ` +
    `pool ${o.pool} per instance shared with ${o.flood} business writers; lockWaitTimeoutMs ${LOCK_WAIT_MS}; ` +
    `maxQueued ${MAX_QUEUED}; a check answered UNKNOWN (shed, lock wait) is asked again ${o.reaskMs} ms later; resolved/s counts the checks not held open, until the last of them is answered.\n\n${table}\n`;
  const out = path.join(__dirname, 'results', id);
  writeFileSync(`${out}.md`, md);
  writeFileSync(
    `${out}.json`,
    JSON.stringify({ id, batched: !process.env.STORM_UNBATCHED, options: o, results }, null, 2),
  );
  console.log(md);
  if (results.some((r) => r.wrong > 0 || r.resolved < r.checks)) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
