import * as fs from 'node:fs';

/** The crash windows of a producer process; 'random' kills after a random delay. */
export const PRODUCER_WINDOWS = ['random', 'after-half', 'in-work', 'after-commit', 'check-back'] as const;
export type ProducerWindow = (typeof PRODUCER_WINDOWS)[number];

/** The crash windows of a consumer process; 'random' kills after a random delay. */
export const CONSUMER_WINDOWS = ['random', 'in-handler', 'before-ack'] as const;
export type ConsumerWindow = (typeof CONSUMER_WINDOWS)[number];

/** Lines a child writes on stdout (synchronously, so they are in the pipe before a freeze or kill). */
export type ChildLine =
  | { t: 'ready' }
  | { t: 'tx'; txId: string }
  | { t: 'window'; window: string; id?: string }
  /** A consumer child acked this message (by messageId): a later process settled what a killed one held. */
  | { t: 'settled'; id: string };

export const CHILD_ENV = 'ROCKETMQ_TX_CHAOS_CHILD';

export function say(line: ChildLine): void {
  fs.writeSync(1, `${JSON.stringify(line)}\n`);
}

/** Stops the whole thread (no timers, no heartbeats, no replies) until the runner's SIGKILL. */
export function freeze(): never {
  for (;;) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}

/** Reports the window, then freezes. */
export function hit(window: string, id?: string): never {
  say({ t: 'window', window, ...(id !== undefined ? { id } : {}) });
  return freeze();
}
