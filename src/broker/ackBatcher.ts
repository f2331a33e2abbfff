/** One settle call waiting for its batch. */
interface Waiting<T> {
  readonly item: T;
  resolve(): void;
  reject(err: unknown): void;
}

interface Queue<T> {
  readonly waiting: Array<Waiting<T>>;
  inFlight: number;
  scheduled: boolean;
}

/**
 * Sends a batch for one key; resolves with one result per item, in order: undefined when the
 * item was accepted, the error to reject its caller with otherwise.
 */
export type SendBatch<T> = (key: string, items: readonly T[]) => Promise<ReadonlyArray<Error | undefined>>;

/**
 * Gathers calls that can share one request (acks of one topic on one proxy: AckMessageRequest
 * takes many entries) without holding any back: a call is sent on the next event-loop turn,
 * together with every call made in the meantime and, while `maxInFlight` requests are already
 * out, with every call made until one of them returns. An idle consumer sends each ack at once;
 * a busy one sends fewer, larger requests. Each caller learns its own item's result.
 */
export class AckBatcher<T> {
  private readonly queues = new Map<string, Queue<T>>();

  constructor(
    private readonly send: SendBatch<T>,
    private readonly maxBatch = 32,
    private readonly maxInFlight = 2,
  ) {}

  add(key: string, item: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let queue = this.queues.get(key);
      if (queue === undefined) {
        queue = { waiting: [], inFlight: 0, scheduled: false };
        this.queues.set(key, queue);
      }
      queue.waiting.push({ item, resolve, reject });
      this.schedule(key, queue);
    });
  }

  private schedule(key: string, queue: Queue<T>): void {
    if (queue.scheduled || queue.inFlight >= this.maxInFlight) return;
    if (queue.waiting.length === 0) {
      if (queue.inFlight === 0) this.queues.delete(key);
      return;
    }
    queue.scheduled = true;
    setImmediate(() => {
      queue.scheduled = false;
      this.flush(key, queue);
    });
  }

  private flush(key: string, queue: Queue<T>): void {
    while (queue.inFlight < this.maxInFlight && queue.waiting.length > 0) {
      const batch = queue.waiting.splice(0, this.maxBatch);
      queue.inFlight++;
      void this.sendOne(key, batch).finally(() => {
        queue.inFlight--;
        this.schedule(key, queue);
      });
    }
  }

  private async sendOne(key: string, batch: Array<Waiting<T>>): Promise<void> {
    let results: ReadonlyArray<Error | undefined>;
    try {
      results = await this.send(
        key,
        batch.map((w) => w.item),
      );
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    }
    batch.forEach((w, i) => {
      const error = results[i];
      if (error === undefined) w.resolve();
      else w.reject(error);
    });
  }
}
