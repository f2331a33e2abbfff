/** Retry schedule of the relay: min(maxDelay, base * 2^attempts) + jitter in [0, jitterMs). */
export interface BackoffPolicy {
  baseMs: number;
  maxDelayMs: number;
  jitterMs: number;
}

/** Delay before the next try after `attempts` failed tries (0 for the first failure). */
export function backoffDelay(
  attempts: number,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number {
  const exponential = policy.baseMs * 2 ** Math.min(Math.max(0, attempts), 52);
  const jitter = Math.floor(Math.min(Math.max(random(), 0), 0.999999) * policy.jitterMs);
  return Math.min(policy.maxDelayMs, exponential) + jitter;
}
