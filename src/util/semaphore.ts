/** Counting semaphore with a bounded wait queue: tryAcquire fails fast when the queue is full. */
export class Semaphore {
  private available: number;
  private readonly waiters: Array<() => void> = [];

  constructor(
    readonly permits: number,
    private readonly maxQueue: number,
  ) {
    this.available = permits;
  }

  get queued(): number {
    return this.waiters.length;
  }

  get inUse(): number {
    return this.permits - this.available;
  }

  /** Resolves with a release function, or with undefined when the wait queue is full. */
  acquire(): Promise<(() => void) | undefined> {
    if (this.available > 0) {
      this.available--;
      return Promise.resolve(this.releaser());
    }
    if (this.waiters.length >= this.maxQueue) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(() => resolve(this.releaser())));
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (next) next();
      else this.available++;
    };
  }
}
