import type { RouteQueue } from '../RocketMqGateway';

/**
 * Round robin over the queues of a route that accept writes and the message type, one cursor
 * per topic; `skip` moves a retry to the next queue. Throws the official client's TypeError
 * (which src/broker/errors.ts maps to InvalidMessageError) when no queue fits.
 */
export class QueueSelector {
  private readonly cursors = new Map<string, number>();
  private readonly usable = new WeakMap<readonly RouteQueue[], Map<number, RouteQueue[]>>();

  select(topic: string, queues: readonly RouteQueue[], type: number, skip = 0): RouteQueue {
    let byType = this.usable.get(queues);
    if (!byType) this.usable.set(queues, (byType = new Map()));
    let usable = byType.get(type);
    if (!usable) {
      usable = queues.filter((q) => q.writable && q.acceptMessageTypes.includes(type));
      byType.set(type, usable);
    }
    if (usable.length === 0) {
      throw new TypeError(
        `Current message type not match with topic accept message types, topic=${topic}, actualMessageType=${type}`,
      );
    }
    const n = this.cursors.get(topic) ?? 0;
    this.cursors.set(topic, (n + 1) % 1_000_000_007);
    return usable[(n + skip) % usable.length]!;
  }
}
