import { NotRunningError, type Component } from '../errors';
import { errorFields, type Logger } from '../util/logger';
import { completesWithin } from '../util/time';

export type LifecycleState = 'NEW' | 'STARTING' | 'RUNNING' | 'STOPPING' | 'STOPPED';

/**
 * One shutdown budget: a single deadline every wait of a shutdown shares, so the steps together
 * never exceed shutdownTimeoutMs (a fresh timeout per step would multiply it).
 */
export class Deadline {
  private readonly end: number;

  constructor(
    budgetMs: number,
    private readonly logger: Logger,
  ) {
    this.end = performance.now() + budgetMs;
  }

  remainingMs(): number {
    return Math.max(0, this.end - performance.now());
  }

  /**
   * Waits for `work` at most the remaining budget; true if it fulfilled in time. On timeout or
   * rejection logs `warning` and resolves false: shutdown goes on, it never hangs or rejects.
   */
  async within(
    work: Promise<unknown>,
    warning: string,
    fields: () => Record<string, unknown> = () => ({}),
  ): Promise<boolean> {
    const failure: { err?: unknown } = {};
    const watched = work.catch((err: unknown) => {
      failure.err = err;
      throw err;
    });
    const left = this.remainingMs();
    // Budget spent: do not wait at all (the work goes on; its rejection is still observed).
    if (left === 0) void watched.catch(() => undefined);
    const ok = left > 0 && (await completesWithin(watched, left));
    if (!ok) {
      this.logger.warn({ ...fields(), ...('err' in failure ? errorFields(failure.err) : {}) }, warning);
    }
    return ok;
  }
}

/** Counts unfinished operations (transactions, handled messages) so shutdown can wait for them. */
export class InFlight {
  private count = 0;
  private waiters: Array<() => void> = [];

  get size(): number {
    return this.count;
  }

  /** Counts `work` until it settles; returns it unchanged. */
  track<T>(work: Promise<T>): Promise<T> {
    this.count++;
    return work.finally(() => {
      this.count--;
      if (this.count === 0) for (const wake of this.waiters.splice(0)) wake();
    });
  }

  /** Resolves once nothing is in flight. */
  idle(): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}

/** What a component plugs into its Lifecycle. */
export interface LifecycleHooks {
  /** Checked synchronously by start() before anything is opened (e.g. an uninitialized DataSource). */
  precondition?(): Error | undefined;
  /** Connects the component's client(s). A failure must leave nothing open. */
  open(): Promise<void>;
  /** Runs once open() succeeded and no shutdown began: start loops and timers. */
  onRunning(): void;
  /** Runs synchronously when shutdown() begins: wake sleeping loops, refuse new work. */
  onStopping?(): void;
  /** Waits for the component's own work (loops, in-flight, flushes); every wait within the deadline. */
  drain(deadline: Deadline): Promise<unknown>;
  /** Closes what open() opened; called once, only if open() succeeded. */
  close(): Promise<void>;
}

export interface LifecycleOptions {
  component: Component;
  /** How users call the class in messages, e.g. `OutboxRelay`. */
  name: string;
  shutdownTimeoutMs: number;
  logger: Logger;
}

/**
 * The start/shutdown state machine of producer, consumer and relay:
 * NEW → STARTING → RUNNING → STOPPING → STOPPED (a failed start goes back to NEW).
 * - start() opens once: concurrent calls share one promise; after shutdown() it rejects with
 *   the component's NotRunningError.
 * - shutdown() during start() wins: the component ends STOPPED, its client closed (also when the
 *   start finishes only after the budget ran out), its loops never started.
 * - Every shutdown() call gets the same promise, settled when the first one finished.
 * - Every wait in shutdown shares one deadline of shutdownTimeoutMs; shutdown never rejects.
 */
export class Lifecycle {
  private current: LifecycleState = 'NEW';
  private starting: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private opened = false;
  /** Set when shutdown gave up waiting for a start: close the client when the start completes. */
  private closeWhenOpened = false;

  constructor(
    private readonly options: LifecycleOptions,
    private readonly hooks: LifecycleHooks,
  ) {}

  get state(): LifecycleState {
    return this.current;
  }

  get isRunning(): boolean {
    return this.current === 'RUNNING';
  }

  /** Throws the component's NotRunningError unless RUNNING. */
  assertRunning(): void {
    if (this.current === 'RUNNING') return;
    const hint =
      this.current === 'NEW' || this.current === 'STARTING' ? 'call start() first' : 'create a new one';
    throw NotRunningError.of(
      this.options.component,
      `${this.options.name} is ${this.current.toLowerCase()}; ${hint}`,
    );
  }

  start(): Promise<void> {
    if (this.current === 'STOPPING' || this.current === 'STOPPED') {
      return Promise.reject(
        NotRunningError.of(this.options.component, `${this.options.name} was shut down; create a new one`),
      );
    }
    if (this.starting) return this.starting;
    const refused = this.hooks.precondition?.();
    if (refused) return Promise.reject(refused);
    this.current = 'STARTING';
    this.starting = this.hooks.open().then(
      () => {
        this.opened = true;
        if (this.closeWhenOpened) {
          void this.closeLate();
          return;
        }
        // A shutdown() begun meanwhile owns the state: start nothing behind its back.
        if (this.current !== 'STARTING') return;
        this.current = 'RUNNING';
        this.hooks.onRunning();
      },
      (err: unknown) => {
        if (this.current === 'STARTING') {
          this.current = 'NEW';
          this.starting = undefined;
        }
        throw err;
      },
    );
    return this.starting;
  }

  shutdown(): Promise<void> {
    if (!this.stopping) this.stopping = this.stop();
    return this.stopping;
  }

  private async stop(): Promise<void> {
    const deadline = new Deadline(this.options.shutdownTimeoutMs, this.options.logger);
    const starting = this.starting;
    this.current = 'STOPPING';
    this.hooks.onStopping?.();
    if (starting) {
      const settled = await deadline.within(
        starting.catch(() => undefined),
        `${this.options.name} start did not finish within shutdownTimeoutMs; its client is closed when it does`,
      );
      // Still starting: the start's own continuation closes the client once it is open.
      if (!settled && !this.opened) this.closeWhenOpened = true;
    }
    await this.hooks.drain(deadline);
    if (this.opened && !this.closeWhenOpened) {
      await deadline.within(this.hooks.close(), `${this.options.name} client did not close in time`);
    }
    this.current = 'STOPPED';
  }

  private async closeLate(): Promise<void> {
    try {
      await this.hooks.close();
    } catch (err) {
      this.options.logger.warn(errorFields(err), `${this.options.name} client did not close cleanly`);
    }
  }
}

/**
 * Calls a user's outcome hook (onOutcome, checkBack.onResolved) the same way on every component:
 * synchronously, after the counters are updated; a throwing hook is logged, never propagated.
 */
export function callHook<T>(
  hook: ((outcome: T) => void) | undefined,
  outcome: T,
  logger: Logger,
  name: string,
): void {
  if (!hook) return;
  try {
    hook(outcome);
  } catch (err) {
    logger.warn(errorFields(err), `${name} hook threw`);
  }
}
