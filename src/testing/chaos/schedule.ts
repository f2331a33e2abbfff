import { InvalidOptionError } from '../../errors';
import { optionalInt } from '../../util/validate';
import { seeded, shuffleInPlace } from '../random';

export interface Round<W extends string> {
  index: number;
  window: W;
  /** For 'random': ms between the process being ready and its SIGKILL. */
  delayMs: number;
}

/**
 * The kill schedule: the windows in turn (each cycle in a seeded order), a seeded delay for
 * the random kills. The same seed, rounds and windows give the same schedule.
 */
export function schedule<W extends string>(
  rounds: number,
  windows: readonly W[],
  seed: number,
  delay: readonly [number, number],
): Round<W>[] {
  const random = seeded(seed);
  const out: Round<W>[] = [];
  let cycle: W[] = [];
  for (let i = 0; i < rounds; i++) {
    if (cycle.length === 0) {
      cycle = [...windows];
      shuffleInPlace(cycle, random);
    }
    out.push({
      index: i,
      window: cycle.shift()!,
      delayMs: Math.round(delay[0] + random() * (delay[1] - delay[0])),
    });
  }
  return out;
}

/** A list of windows, each one of `allowed`, no repeats; default all of them. */
export function resolveWindows<W extends string>(option: string, value: unknown, allowed: readonly W[]): W[] {
  if (value === undefined) return [...allowed];
  if (!Array.isArray(value) || value.length === 0) {
    throw new InvalidOptionError(option, value, `a non-empty list of ${allowed.join(', ')}`);
  }
  const out: W[] = [];
  for (const w of value as unknown[]) {
    if (typeof w !== 'string' || !allowed.includes(w as W) || out.includes(w as W)) {
      throw new InvalidOptionError(option, value, `a list of distinct windows among ${allowed.join(', ')}`);
    }
    out.push(w as W);
  }
  return out;
}

/** [min, max] delay in ms, min <= max. */
export function resolveDelay(option: string, value: unknown, fallback: [number, number]): [number, number] {
  if (value === undefined) return fallback;
  if (!Array.isArray(value) || value.length !== 2) {
    throw new InvalidOptionError(option, value, 'a [minMs, maxMs] pair');
  }
  const min = optionalInt(`${option}[0]`, value[0], 0, 0, 600_000);
  const max = optionalInt(`${option}[1]`, value[1], 0, min, 600_000);
  return [min, max];
}
