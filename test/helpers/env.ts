/** Connection settings for integration tests, and a condition-polling helper (no fixed sleeps). */

/** gRPC endpoints of the RocketMQ 5 proxy (scripts/rocketmq.js starts one on 127.0.0.1:8081). */
// The local broker's gRPC port moves with ROCKETMQ_TX_PORT_OFFSET (scripts/rocketmq.js).
export const ENDPOINTS: string =
  process.env.ROCKETMQ_ENDPOINTS ?? `127.0.0.1:${8081 + Number(process.env.ROCKETMQ_TX_PORT_OFFSET || 0)}`;

/**
 * The producers' transport for the suite: ROCKETMQ_TX_TRANSPORT=official (or lean) runs every
 * producer made by makeProducer() over that transport; unset, the producer default (lean).
 */
export const TRANSPORT: 'lean' | 'official' | undefined = (() => {
  const t = process.env.ROCKETMQ_TX_TRANSPORT;
  if (t === undefined || t === '') return undefined;
  if (t !== 'lean' && t !== 'official')
    throw new Error(`ROCKETMQ_TX_TRANSPORT must be lean or official, got ${t}`);
  return t;
})();

/** Database for integration tests (MariaDB/MySQL). */
export const DB_URL: string = process.env.ROCKETMQ_TX_DB_URL ?? 'mysql://root@127.0.0.1:3306/test';

export interface WaitForOptions {
  /** Give up after this many ms (default 30 000). */
  timeoutMs?: number;
  /** Poll every this many ms (default 100). */
  intervalMs?: number;
  /** What is being waited for; used in the timeout error. */
  description?: string;
}

/**
 * Polls `cond` until it returns true; throws a descriptive error on timeout. A condition that
 * throws is treated as "not yet" and the last error is reported if the wait times out.
 * Resolves with the elapsed time in ms.
 */
export async function waitFor(
  cond: () => Promise<boolean> | boolean,
  { timeoutMs = 30_000, intervalMs = 100, description = 'condition' }: WaitForOptions = {},
): Promise<number> {
  const start = Date.now();
  let lastError: unknown;
  let attempts = 0;
  for (;;) {
    attempts++;
    try {
      if (await cond()) return Date.now() - start;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    const elapsed = Date.now() - start;
    if (elapsed >= timeoutMs) {
      const why = lastError instanceof Error ? `; last error: ${lastError.message}` : '';
      throw new Error(`Timed out after ${elapsed} ms (${attempts} checks) waiting for ${description}${why}`);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, timeoutMs - elapsed)));
  }
}
