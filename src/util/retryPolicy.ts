import { InvalidOptionError } from '../errors';
import { optionalInt, optionalObject, rejectUnknownKeys } from './validate';

/**
 * The retry schedule of every component (the relay's failed sends, the consumer's redeliveries):
 * the n-th retry (n = 0 for the first) waits min(maxDelayMs, initialDelayMs * 2^n) plus a
 * uniform jitter in [0, jitterMs).
 */
export interface RetryPolicy {
  /** Delay before the first retry. */
  initialDelayMs: number;
  /** Upper bound of the doubling delay (before jitter). */
  maxDelayMs: number;
  /** Random extra delay in [0, jitterMs), so retries of many failures spread out. */
  jitterMs: number;
}

/** A RetryPolicy as an option: any field may be left out for its default. */
export type RetryOptions = Partial<RetryPolicy>;

const RETRY_KEYS = ['initialDelayMs', 'maxDelayMs', 'jitterMs'] as const;
const HOUR = 3_600_000;

/** Delay before the retry that follows `failures` failed tries (0 for the first failure). */
export function retryDelay(
  failures: number,
  policy: RetryPolicy,
  random: () => number = Math.random,
): number {
  const exponential = policy.initialDelayMs * 2 ** Math.min(Math.max(0, failures), 52);
  const jitter = Math.floor(Math.min(Math.max(random(), 0), 0.999999) * policy.jitterMs);
  return Math.min(policy.maxDelayMs, exponential) + jitter;
}

/**
 * Validates a RetryPolicy option named `option`. `legacy`, when given, is an older option of the
 * same meaning with `baseMs` for `initialDelayMs` (the relay's `backoff`); at most one of the two
 * may be set. Every error names the option the user wrote. `maxAllowedDelayMs` caps maxDelayMs.
 */
export function resolveRetryPolicy(
  option: string,
  value: unknown,
  defaults: RetryPolicy & { maxAllowedDelayMs: number },
  legacy?: { option: string; value: unknown },
): RetryPolicy {
  if (legacy && legacy.value !== undefined) {
    if (value !== undefined) {
      throw new InvalidOptionError(
        legacy.option,
        legacy.value,
        `left out when ${option} is given (same meaning)`,
      );
    }
    const b = optionalObject(legacy.option, legacy.value);
    rejectUnknownKeys(legacy.option, b, ['baseMs', 'maxDelayMs', 'jitterMs']);
    return checked(
      legacy.option,
      'baseMs',
      { initialDelayMs: b.baseMs, maxDelayMs: b.maxDelayMs, jitterMs: b.jitterMs },
      defaults,
    );
  }
  const r = optionalObject(option, value);
  rejectUnknownKeys(option, r, RETRY_KEYS);
  return checked(option, 'initialDelayMs', r, defaults);
}

function checked(
  option: string,
  initialName: string,
  r: Record<string, unknown>,
  defaults: RetryPolicy & { maxAllowedDelayMs: number },
): RetryPolicy {
  const ceiling = defaults.maxAllowedDelayMs;
  const initialDelayMs = optionalInt(
    `${option}.${initialName}`,
    r.initialDelayMs,
    defaults.initialDelayMs,
    0,
    HOUR,
  );
  const maxDelayMs = optionalInt(`${option}.maxDelayMs`, r.maxDelayMs, defaults.maxDelayMs, 0, ceiling);
  if (maxDelayMs < initialDelayMs) {
    throw new InvalidOptionError(
      `${option}.maxDelayMs`,
      maxDelayMs,
      `at least ${option}.${initialName} (${initialDelayMs})`,
      { min: initialDelayMs, max: ceiling },
    );
  }
  const jitterMs = optionalInt(`${option}.jitterMs`, r.jitterMs, defaults.jitterMs, 0, HOUR);
  return { initialDelayMs, maxDelayMs, jitterMs };
}
