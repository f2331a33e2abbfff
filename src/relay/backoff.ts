import { retryDelay } from '../util/retryPolicy';

/**
 * The relay's retry schedule under its older names (`baseMs` = RetryPolicy.initialDelayMs):
 * min(maxDelay, base * 2^attempts) + jitter in [0, jitterMs).
 */
export interface BackoffPolicy {
  baseMs: number;
  maxDelayMs: number;
  jitterMs: number;
}

/** Delay before the next try after `attempts` failed tries (0 for the first failure); see retryDelay. */
export function backoffDelay(
  attempts: number,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number {
  return retryDelay(
    attempts,
    { initialDelayMs: policy.baseMs, maxDelayMs: policy.maxDelayMs, jitterMs: policy.jitterMs },
    random,
  );
}
