import { backoffDelay, type BackoffPolicy } from '../../src/relay/backoff';

const policy: BackoffPolicy = { baseMs: 100, maxDelayMs: 5000, jitterMs: 50 };

describe('relay backoff', () => {
  it('stays within min(maxDelay, base * 2^attempts) + [0, jitter) for every attempt', () => {
    for (let attempts = 0; attempts < 80; attempts++) {
      const floor = Math.min(policy.maxDelayMs, policy.baseMs * 2 ** attempts);
      for (const r of [0, 0.25, 0.5, 0.999999, 1]) {
        const d = backoffDelay(attempts, policy, () => r);
        expect(d).toBeGreaterThanOrEqual(floor);
        expect(d).toBeLessThan(floor + policy.jitterMs);
      }
    }
  });

  it('doubles from the base and caps at maxDelay', () => {
    const noJitter = () => 0;
    expect([0, 1, 2, 3, 5, 6, 60].map((a) => backoffDelay(a, policy, noJitter))).toEqual([
      100, 200, 400, 800, 3200, 5000, 5000,
    ]);
  });

  it('never returns NaN or Infinity for huge or negative attempt counts', () => {
    for (const a of [-3, 1e6, Number.MAX_SAFE_INTEGER]) {
      const d = backoffDelay(a, policy, Math.random);
      expect(Number.isFinite(d)).toBe(true);
      expect(d).toBeLessThan(policy.maxDelayMs + policy.jitterMs);
    }
  });
});
