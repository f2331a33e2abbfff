/**
 * The consumer's concurrency budget, held from before a receive call until the message is
 * settled: a loop asks the broker only for slots it has reserved, so received-but-unsettled
 * messages never exceed the capacity. Each waiting loop keeps its own place in a FIFO queue and
 * is woken when enough slots free, so no loop is lost and none starves another.
 */
export class ReceiveSlots {
  private used = 0;
  private closed = false;
  private readonly waiters: Array<{ max: number; min: number; grant: (slots: number) => void }> = [];

  constructor(readonly capacity: number) {}

  /** Slots reserved or held by unfinished messages. */
  get inUse(): number {
    return this.used;
  }

  /**
   * Resolves with min..max reserved slots once at least `min` are free (`min` is capped at the
   * capacity), so a busy consumer asks the broker for batches instead of one message at a time;
   * with 0 once closed.
   */
  reserve(max: number, min = 1): Promise<number> {
    if (this.closed) return Promise.resolve(0);
    const need = Math.max(1, Math.min(min, max, this.capacity));
    if (this.waiters.length === 0 && this.free >= need) return Promise.resolve(this.take(max));
    return new Promise((grant) => this.waiters.push({ max, min: need, grant }));
  }

  /** Returns slots (an unused reservation, or a finished message's) and serves waiters in order. */
  release(slots: number): void {
    this.used -= slots;
    while (!this.closed && this.waiters.length > 0 && this.free >= this.waiters[0]!.min) {
      const waiter = this.waiters.shift()!;
      waiter.grant(this.take(waiter.max));
    }
  }

  /** Wakes every waiting loop with 0 slots; later reservations get 0 too. */
  close(): void {
    this.closed = true;
    for (const waiter of this.waiters.splice(0)) waiter.grant(0);
  }

  private get free(): number {
    return this.capacity - this.used;
  }

  private take(max: number): number {
    const slots = Math.min(max, this.free);
    this.used += slots;
    return slots;
  }
}
