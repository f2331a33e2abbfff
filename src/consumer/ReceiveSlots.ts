/**
 * The consumer's concurrency budget, held from before a receive call until the message is
 * settled: a loop asks the broker only for slots it has reserved, so received-but-unfinished
 * messages never exceed the capacity. Each waiting loop keeps its own place in a FIFO queue and
 * is woken when slots free, so no loop is lost and none starves another.
 */
export class ReceiveSlots {
  private used = 0;
  private closed = false;
  private readonly waiters: Array<{ max: number; grant: (slots: number) => void }> = [];

  constructor(readonly capacity: number) {}

  /** Slots reserved or held by unfinished messages. */
  get inUse(): number {
    return this.used;
  }

  /** Resolves with 1..max reserved slots, waiting for one to free; with 0 once closed. */
  reserve(max: number): Promise<number> {
    if (this.closed) return Promise.resolve(0);
    if (this.waiters.length === 0 && this.used < this.capacity) return Promise.resolve(this.take(max));
    return new Promise((grant) => this.waiters.push({ max, grant }));
  }

  /** Returns slots (an unused reservation, or a finished message's) and serves waiters in order. */
  release(slots: number): void {
    this.used -= slots;
    while (!this.closed && this.waiters.length > 0 && this.used < this.capacity) {
      const waiter = this.waiters.shift()!;
      waiter.grant(this.take(waiter.max));
    }
  }

  /** Wakes every waiting loop with 0 slots; later reservations get 0 too. */
  close(): void {
    this.closed = true;
    for (const waiter of this.waiters.splice(0)) waiter.grant(0);
  }

  private take(max: number): number {
    const slots = Math.min(max, this.capacity - this.used);
    this.used += slots;
    return slots;
  }
}
