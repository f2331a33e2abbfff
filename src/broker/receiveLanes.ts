/**
 * Which broker a receive goes to. The official SimpleConsumer sends each receive to the next
 * broker of the route in turn; behind a Cluster-mode proxy a long poll on a broker that has
 * nothing for the group waits its full duration, so round-robin parks every loop on the empty
 * broker in turn while messages wait on the other (a 5 s stall per pass). Here each receive goes
 * to the lane (topic x broker) with the fewest receives open, rotating among ties: loops spread
 * over the brokers and a loop parked on an empty broker never holds the others back.
 */
export class ReceiveLanes {
  private readonly open = new Map<string, number>();
  private turn = 0;

  /** The candidate with the fewest receives open (rotating among equals); undefined if none. */
  pick<T extends { readonly key: string }>(candidates: readonly T[]): T | undefined {
    let best: T | undefined;
    let fewest = Infinity;
    const n = candidates.length;
    for (let i = 0; i < n; i++) {
      const candidate = candidates[(this.turn + i) % n]!;
      const count = this.open.get(candidate.key) ?? 0;
      if (count < fewest) {
        best = candidate;
        fewest = count;
      }
    }
    this.turn = (this.turn + 1) % Math.max(1, n);
    return best;
  }

  /** Runs `receive` as an open receive on `key`'s lane. */
  async within<R>(key: string, receive: () => Promise<R>): Promise<R> {
    this.open.set(key, (this.open.get(key) ?? 0) + 1);
    try {
      return await receive();
    } finally {
      const left = (this.open.get(key) ?? 1) - 1;
      if (left === 0) this.open.delete(key);
      else this.open.set(key, left);
    }
  }
}
