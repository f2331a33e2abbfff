import type { EntityManager } from 'typeorm';
import {
  IdempotentConsumer,
  InvalidOptionError,
  UnhandledEventError,
  createEnvelope,
  defineEvent,
  on,
  type Envelope,
  type EventHandler,
  type IdempotentConsumerOptions,
} from '../../src';
import type { ConsumerGateway, InboundMessage } from '../../src/broker/consumerGateway';
import { LongPolls } from './fakes/fakes';
import type { ConsumedRow, CursorKey, InboxStore, InboxTransaction } from '../../src/store/ports';
import { HandlerRegistry } from '../../src/consumer/handlers';
import { MessageProcessor } from '../../src/consumer/MessageProcessor';
import { ReceiveSlots } from '../../src/consumer/ReceiveSlots';
import { receivePlan } from '../../src/consumer/IdempotentConsumer';
import { claimInTwoSteps } from '../../src/store/cursor';

/** In-memory consumed_event + aggregate_cursor with transactional staging. */
class FakeInbox implements InboxStore {
  consumed = new Map<string, string>();
  cursors = new Map<string, number>();
  commits = 0;
  rollbacks = 0;
  failCommit = false;
  isConflict(): boolean {
    return false;
  }
  private lock: Promise<unknown> = Promise.resolve();
  /** Serialized, as row locks on one aggregate and one eventId serialize the real transactions. */
  transaction<T>(fn: (tx: InboxTransaction) => Promise<{ commit: boolean; value: T }>): Promise<T> {
    const run = this.lock.then(() => this.run(fn));
    this.lock = run.catch(() => undefined);
    return run;
  }
  private async run<T>(fn: (tx: InboxTransaction) => Promise<{ commit: boolean; value: T }>): Promise<T> {
    const consumed = new Map(this.consumed);
    const cursors = new Map(this.cursors);
    const key = (k: CursorKey) => `${k.consumerGroup}/${k.aggregateType}/${k.aggregateId}`;
    const tx: InboxTransaction = {
      manager: {} as EntityManager,
      insertConsumed: async (r: ConsumedRow) => {
        const k = `${r.consumerGroup}/${r.eventId}`;
        if (consumed.has(k)) return false;
        consumed.set(k, 'APPLIED');
        return true;
      },
      markOutcome: async (r, outcome) => {
        consumed.set(`${r.consumerGroup}/${r.eventId}`, outcome);
      },
      lockCursor: async (k) => cursors.get(key(k)) ?? 0,
      advanceCursor: async (k, v) => {
        cursors.set(key(k), v);
      },
      claimVersion: (k, v, acceptGap) => claimInTwoSteps(tx, k, v, acceptGap),
    };
    let out: { commit: boolean; value: T };
    try {
      out = await fn(tx);
    } catch (err) {
      this.rollbacks++;
      throw err;
    }
    if (!out.commit) {
      this.rollbacks++;
      return out.value;
    }
    if (this.failCommit) throw new Error('connection lost during COMMIT');
    this.consumed = consumed;
    this.cursors = cursors;
    this.commits++;
    return out.value;
  }
}

const Added = defineEvent<{ sku: string }>({
  eventType: 'ItemAdded',
  eventVersion: 2,
  aggregateType: 'Cart',
});

function envelope(version: number, over: Partial<Envelope> = {}): Envelope {
  return {
    ...createEnvelope({
      eventType: 'ItemAdded',
      eventVersion: 2,
      aggregateType: 'Cart',
      aggregateId: 'c1',
      aggregateVersion: version,
      data: { sku: `s${version}` },
    }),
    ...over,
  };
}

let seq = 0;
function message(body: Envelope | string | Buffer, deliveryAttempt = 1): InboundMessage {
  return {
    messageId: `m${seq++}`,
    topic: 't',
    keys: [],
    properties: {},
    body: Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)),
    deliveryAttempt,
  };
}

function setup(
  opts: { gapPolicy?: 'hold' | 'accept'; handlers?: EventHandler[]; unknown?: 'retry' | 'ignore' } = {},
) {
  const applied: Array<{ version: number; eventVersion: number; data: unknown; gap?: unknown }> = [];
  const store = new FakeInbox();
  const handlers = opts.handlers ?? [
    on(Added, async (e, ctx) => {
      applied.push({ version: e.aggregateVersion, eventVersion: e.eventVersion, data: e.data, gap: ctx.gap });
    }),
  ];
  const processor = new MessageProcessor(store, {
    consumerGroup: 'g',
    registry: new HandlerRegistry(handlers, [
      {
        eventType: 'ItemAdded',
        fromVersion: 1,
        upcast: (d: unknown) => ({ sku: (d as { code: string }).code }),
      },
    ]),
    gapPolicy: opts.gapPolicy ?? 'hold',
    unknownEventTypes: opts.unknown ?? 'retry',
    maxBodyBytes: 1024,
  });
  return { store, processor, applied };
}

describe('MessageProcessor: the consumer decision', () => {
  it('applies the next version, then a duplicate eventId is acked without calling the handler', async () => {
    const { processor, applied, store } = setup();
    const e1 = envelope(1);
    expect((await processor.process(message(e1))).kind).toBe('APPLIED');
    expect((await processor.process(message(e1))).kind).toBe('DUPLICATE');
    expect(applied.map((a) => a.version)).toEqual([1]);
    expect(store.consumed.get(`g/${e1.eventId}`)).toBe('APPLIED');
  });

  it('passes a well-formed traceparent property to the handler, and nothing else', async () => {
    const seen: Array<string | undefined> = [];
    const { processor } = setup({
      handlers: [on(Added, async (_e, ctx) => void seen.push(ctx.message.traceparent))],
    });
    const good = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const withProps = (version: number, traceparent: string) => ({
      ...message(envelope(version)),
      properties: { traceparent },
    });
    await processor.process(withProps(1, good));
    await processor.process(withProps(2, 'not-a-trace\u0001x'));
    await processor.process(message(envelope(3)));
    expect(seen).toEqual([good, undefined, undefined]);
  });

  it('an older aggregateVersion under a new eventId is stale: recorded, handler not called', async () => {
    const { processor, applied, store } = setup();
    await processor.process(message(envelope(1)));
    await processor.process(message(envelope(2)));
    const old = envelope(1);
    expect(await processor.process(message(old))).toMatchObject({ kind: 'STALE', cursorVersion: 2 });
    expect(applied.map((a) => a.version)).toEqual([1, 2]);
    expect(store.consumed.get(`g/${old.eventId}`)).toBe('STALE');
  });

  it('hold: a gap rolls back (nothing recorded), then applies in order once the gap fills', async () => {
    const { processor, applied, store } = setup();
    const [v1, v2, v3] = [envelope(1), envelope(2), envelope(3)];
    await processor.process(message(v1));
    expect(await processor.process(message(v3))).toMatchObject({ kind: 'GAP_HELD', cursorVersion: 1 });
    expect(store.consumed.has(`g/${v3.eventId}`)).toBe(false);
    expect((await processor.process(message(v2))).kind).toBe('APPLIED');
    expect((await processor.process(message(v3, 2))).kind).toBe('APPLIED');
    expect(applied.map((a) => a.version)).toEqual([1, 2, 3]);
  });

  it('accept: a gap is applied, the handler is told, and the late version becomes stale', async () => {
    const { processor, applied } = setup({ gapPolicy: 'accept' });
    await processor.process(message(envelope(1)));
    expect(await processor.process(message(envelope(4)))).toMatchObject({
      kind: 'APPLIED',
      gap: { expectedVersion: 2 },
    });
    expect(applied[1]!.gap).toEqual({ expectedVersion: 2, receivedVersion: 4 });
    expect((await processor.process(message(envelope(2)))).kind).toBe('STALE');
  });

  it('a handler that throws rolls back consumed_event and the cursor: the retry applies it', async () => {
    let fail = true;
    const { processor, store } = setup({
      handlers: [
        on(Added, async () => {
          if (fail) throw new Error('boom');
        }),
      ],
    });
    const e = envelope(1);
    const first = await processor.process(message(e));
    expect(first).toMatchObject({ kind: 'HANDLER_FAILED' });
    expect(store.consumed.size).toBe(0);
    expect(store.cursors.size).toBe(0);
    fail = false;
    expect((await processor.process(message(e, 2))).kind).toBe('APPLIED');
  });

  it('a failed COMMIT is a store failure (not acked); the redelivery then decides', async () => {
    const { processor, store } = setup();
    store.failCommit = true;
    expect((await processor.process(message(envelope(1)))).kind).toBe('STORE_FAILED');
  });

  it('older contract versions are upcast; unknown versions and types are counted failures, not skips', async () => {
    const { processor, applied } = setup();
    const v1 = { ...envelope(1), eventVersion: 1, data: { code: 'legacy' } };
    expect((await processor.process(message(v1))).kind).toBe('APPLIED');
    expect(applied[0]).toMatchObject({ eventVersion: 2, data: { sku: 'legacy' } });
    const v9 = await processor.process(message({ ...envelope(2), eventVersion: 9 }));
    expect(v9).toMatchObject({ kind: 'UNHANDLED' });
    expect((v9 as { error: Error }).error).toBeInstanceOf(UnhandledEventError);
    expect((v9 as { error: Error }).error.message).toBe(
      'No handler for ItemAdded version 9 (handled versions: 2)',
    );
    expect((await processor.process(message({ ...envelope(2), eventType: 'Other' }))).kind).toBe('UNHANDLED');
  });

  it('unknownEventTypes "ignore": acked as IGNORED and the cursor still advances', async () => {
    const { processor, store } = setup({ unknown: 'ignore' });
    expect((await processor.process(message({ ...envelope(1), eventType: 'Other' }))).kind).toBe('IGNORED');
    expect([...store.cursors.values()]).toEqual([1]);
  });

  it.each([
    ['not JSON', 'nope{', /^Invalid message body: got Buffer of 5 bytes; expected a JSON envelope/],
    ['empty', Buffer.alloc(0), /expected a JSON envelope \(got an empty body\)/],
    ['too large', Buffer.alloc(2000, 0x20), /expected a body of at most 1024 bytes/],
    ['an array', '[]', /^Invalid message body: got array of length 0; expected an envelope object/],
    [
      'missing eventId',
      JSON.stringify({ ...envelope(1), eventId: undefined }),
      /body\.eventId: got undefined/,
    ],
    [
      'bad occurredAt',
      JSON.stringify({ ...envelope(1), occurredAt: '2025-01-01 10:00' }),
      /body\.occurredAt: got "2025-01-01 10:00"; expected an ISO-8601 UTC/,
    ],
    [
      'negative version',
      JSON.stringify({ ...envelope(1), aggregateVersion: -1 }),
      /body\.aggregateVersion: got -1/,
    ],
  ])('malformed (%s): a clear error naming the field, no transaction', async (_name, body, re) => {
    const { processor, store } = setup();
    const d = await processor.process(message(body as string | Buffer));
    expect(d.kind).toBe('MALFORMED');
    expect(String((d as { error: Error }).error.message)).toMatch(re);
    expect(store.commits + store.rollbacks).toBe(0);
  });
});

class FakeConsumerGateway implements ConsumerGateway {
  queue: InboundMessage[] = [];
  acked: string[] = [];
  retried: Array<{ id: string; delay: number }> = [];
  dead: string[] = [];
  maxDeliveryAttempts: number | undefined = 3;
  shutdowns = 0;
  readonly polls = new LongPolls(FAKE_LONG_POLL_MS);
  async start(): Promise<void> {}
  push(m: InboundMessage): void {
    this.queue.push(m);
    this.polls.wakeAll();
  }
  /** What happened, in order: `ack:<id>`, `shutdown`. */
  readonly events: string[] = [];
  /** A long poll: what is queued, else waits for a push or the poll's end (like the proxy's). */
  async receive(max: number): Promise<InboundMessage[]> {
    if (this.queue.length === 0) await this.polls.wait();
    return this.queue.splice(0, max);
  }
  async ack(m: InboundMessage): Promise<void> {
    this.acked.push(m.messageId);
    this.events.push(`ack:${m.messageId}`);
  }
  async retryLater(m: InboundMessage, delay: number): Promise<void> {
    this.retried.push({ id: m.messageId, delay });
  }
  async deadLetter(m: InboundMessage): Promise<void> {
    this.dead.push(m.messageId);
  }
  async shutdown(): Promise<void> {
    this.shutdowns++;
    this.events.push('shutdown');
    this.polls.wakeAll();
  }
}

const FAKE_LONG_POLL_MS = 200;

const fakeDataSource = { createQueryRunner: () => ({}), isInitialized: true, options: { type: 'mysql' } };

function consumerWith(gateway: FakeConsumerGateway, store: InboxStore, handle: EventHandler['handle']) {
  return new IdempotentConsumer(
    {
      endpoints: '127.0.0.1:8081',
      dataSource: fakeDataSource as unknown as IdempotentConsumerOptions['dataSource'],
      consumerGroup: 'g',
      subscriptions: ['t'],
      handlers: [{ eventType: 'ItemAdded', eventVersion: 2, handle }],
      concurrency: 2,
      retry: { initialDelayMs: 100, maxDelayMs: 400 },
    },
    { gateway: () => gateway, store },
  );
}

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setImmediate(r));
  if (!cond()) throw new Error('condition not reached');
}

/**
 * A broker with any number of concurrent long polls: a receive returns at once when messages are
 * queued, else stays open until some arrive or the poll ends (FAKE_LONG_POLL_MS). Counts messages received but not settled.
 */
class PollingGateway implements ConsumerGateway {
  queue: InboundMessage[] = [];
  acked: string[] = [];
  maxDeliveryAttempts: number | undefined = 3;
  /** The largest number of received-but-unsettled messages seen. */
  maxOutstanding = 0;
  private outstanding = 0;
  readonly polls = new LongPolls(FAKE_LONG_POLL_MS);
  async start(): Promise<void> {}
  push(...messages: InboundMessage[]): void {
    this.queue.push(...messages);
    this.polls.wakeAll();
  }
  readonly asked: number[] = [];
  async receive(max: number): Promise<InboundMessage[]> {
    this.asked.push(max);
    if (this.queue.length === 0) await this.polls.wait();
    const got = this.queue.splice(0, max);
    this.outstanding += got.length;
    this.maxOutstanding = Math.max(this.maxOutstanding, this.outstanding);
    return got;
  }
  async ack(m: InboundMessage): Promise<void> {
    this.outstanding--;
    this.acked.push(m.messageId);
  }
  async retryLater(): Promise<void> {
    this.outstanding--;
  }
  async deadLetter(): Promise<void> {
    this.outstanding--;
  }
  async shutdown(): Promise<void> {
    this.polls.wakeAll();
  }
}

describe('IdempotentConsumer: receive loops and the concurrency bound', () => {
  it('receivePlan: one loop below 16 slots a subscription, up to 4 loops, batches of at most 32', () => {
    expect(receivePlan(1, 1)).toEqual({ loops: 1, batch: 1, minBatch: 1 });
    expect(receivePlan(8, 2)).toEqual({ loops: 1, batch: 4, minBatch: 2 });
    expect(receivePlan(16, 1)).toEqual({ loops: 2, batch: 8, minBatch: 4 });
    expect(receivePlan(64, 1)).toEqual({ loops: 4, batch: 16, minBatch: 8 });
    expect(receivePlan(256, 1)).toEqual({ loops: 4, batch: 32, minBatch: 16 });
    expect(receivePlan(3, 5)).toEqual({ loops: 1, batch: 1, minBatch: 1 });
  });

  it('ReceiveSlots: a loop waits until its minimum is free, in FIFO order', async () => {
    const slots = new ReceiveSlots(4);
    expect(await slots.reserve(4)).toBe(4);
    const got: number[] = [];
    const a = slots.reserve(4, 2).then((n) => got.push(n));
    slots.release(1);
    await new Promise((r) => setImmediate(r));
    expect(got).toEqual([]); // 1 free, 2 needed
    slots.release(2);
    await a;
    expect(got).toEqual([3]);
    expect(slots.inUse).toBe(4);
    // A minimum above the capacity is capped at it.
    slots.release(4);
    expect(await slots.reserve(10, 10)).toBe(4);
  });

  it('ReceiveSlots: waiting loops are served in order, none past capacity, all woken by close()', async () => {
    const slots = new ReceiveSlots(2);
    expect(await slots.reserve(5)).toBe(2);
    const granted: string[] = [];
    const a = slots.reserve(2).then((n) => granted.push(`a:${n}`));
    const b = slots.reserve(2).then((n) => granted.push(`b:${n}`));
    slots.release(1);
    await a;
    expect(granted).toEqual(['a:1']);
    expect(slots.inUse).toBe(2);
    slots.release(1);
    await b;
    expect(granted).toEqual(['a:1', 'b:1']);
    const c = slots.reserve(1);
    const d = slots.reserve(1);
    slots.close();
    expect(await Promise.all([c, d])).toEqual([0, 0]);
    expect(await slots.reserve(1)).toBe(0);
  });

  it.each([
    [['a', 'b'], 2],
    [['a', 'b'], 3],
    [['a', 'b'], 4],
    [['a'], 16],
    [['a', 'b'], 64],
  ])(
    'subscriptions %j at concurrency %i: every loop keeps polling, asks for batches, and received-but-unfinished messages never exceed the concurrency',
    async (subscriptions, concurrency) => {
      const plan = receivePlan(concurrency, subscriptions.length);
      const loops = subscriptions.length * plan.loops;
      const gw = new PollingGateway();
      const held: Array<() => void> = [];
      const c = new IdempotentConsumer(
        {
          endpoints: '127.0.0.1:8081',
          dataSource: fakeDataSource as unknown as IdempotentConsumerOptions['dataSource'],
          consumerGroup: 'g',
          subscriptions,
          handlers: [
            {
              eventType: 'ItemAdded',
              eventVersion: 2,
              handle: () => new Promise<void>((release) => held.push(release)),
            },
          ],
          concurrency,
        },
        { gateway: () => gw, store: new FakeInbox() },
      );
      const total = concurrency * 4;
      gw.push(...Array.from({ length: total }, (_, i) => message(envelope(1, { aggregateId: `c${i}` }))));
      await c.start();
      // Handlers finish one at a time, so the loops run into a full budget again and again.
      while (gw.acked.length < total) {
        await until(() => held.length > 0 || gw.acked.length === total);
        held.shift()?.();
      }
      await until(() => gw.polls.open === loops);
      expect(gw.maxOutstanding).toBeGreaterThan(0);
      expect(gw.maxOutstanding).toBeLessThanOrEqual(concurrency);
      // A full budget freeing one slot at a time still asks the broker for at least minBatch.
      expect(Math.min(...gw.asked)).toBeGreaterThanOrEqual(plan.minBatch);
      expect(Math.max(...gw.asked)).toBeLessThanOrEqual(plan.batch);
      // Both loops are still alive: a message arriving now is received and applied.
      gw.push(message(envelope(1, { aggregateId: 'late' })));
      await until(() => held.length > 0);
      held.shift()!();
      await until(() => gw.acked.length === total + 1);
      await c.shutdown();
      expect(gw.polls.open).toBe(0);
    },
  );
});

describe('IdempotentConsumer: settling with the broker', () => {
  it('acks applied and duplicate messages; retries a failure with backoff; dead-letters at the last attempt', async () => {
    const gw = new FakeConsumerGateway();
    const c = consumerWith(gw, new FakeInbox(), async (e) => {
      if (e.aggregateId === 'bad') throw new Error('boom');
    });
    await c.start();
    const good = envelope(1);
    const bad = envelope(1, { aggregateId: 'bad' });
    const [m1, m2, m3, m4] = [message(good), message(good), message(bad, 1), message(bad, 3)];
    [m1, m2, m3, m4].forEach((m) => gw.push(m));
    await until(() => gw.acked.length + gw.retried.length + gw.dead.length === 4);
    expect(gw.acked.sort()).toEqual([m1.messageId, m2.messageId].sort());
    expect(gw.retried).toEqual([{ id: m3.messageId, delay: expect.any(Number) }]);
    expect(gw.retried[0]!.delay).toBeGreaterThanOrEqual(80);
    expect(gw.dead).toEqual([m4.messageId]);
    expect(c.stats).toMatchObject({ applied: 1, duplicates: 1, handlerFailures: 2, deadLettered: 1 });
    await c.shutdown();
  });

  it('malformed messages are dead-lettered at once and counted, never acked', async () => {
    const gw = new FakeConsumerGateway();
    const c = consumerWith(gw, new FakeInbox(), async () => undefined);
    await c.start();
    const m = message('garbage');
    gw.push(m);
    await until(() => gw.dead.length === 1);
    expect(gw.acked).toEqual([]);
    expect(c.stats).toMatchObject({ malformed: 1, deadLettered: 1 });
    await c.shutdown();
  });

  it('shutdown waits for in-flight handlers to finish and settle', async () => {
    const gw = new FakeConsumerGateway();
    let release!: () => void;
    const entered = new Promise<void>((r) => {
      const gate = new Promise<void>((g) => (release = g));
      void gate;
      r();
    });
    let inHandler = false;
    let gate!: () => void;
    const c = consumerWith(gw, new FakeInbox(), async () => {
      inHandler = true;
      await new Promise<void>((r) => (gate = r));
    });
    await c.start();
    await entered;
    release();
    gw.push(message(envelope(1)));
    await until(() => inHandler);
    const done = c.shutdown();
    let finished = false;
    void done.then(() => (finished = true));
    await new Promise((r) => setImmediate(r));
    expect(finished).toBe(false);
    gate();
    await done;
    expect(gw.acked).toHaveLength(1);
    expect(gw.shutdowns).toBe(1);
  });

  it('shutdown lets an open long poll return and settles what it brings before closing the client', async () => {
    // A cancelled long poll is still served by the proxy: what it pops is then hidden from every
    // consumer of the group (see IdempotentConsumer's drain).
    const gw = new FakeConsumerGateway();
    const c = consumerWith(gw, new FakeInbox(), async () => undefined);
    await c.start();
    await until(() => gw.polls.open > 0);
    const done = c.shutdown();
    await new Promise((r) => setTimeout(r, 20));
    const late = message(envelope(1));
    gw.push(late);
    await done;
    expect(gw.events).toEqual([`ack:${late.messageId}`, 'shutdown']);
    expect(c.stats).toMatchObject({ received: 1, applied: 1 });
  });

  it('validates every option at construction, naming option, value and what is allowed', () => {
    const base = {
      endpoints: '127.0.0.1:8081',
      dataSource: fakeDataSource as unknown as IdempotentConsumerOptions['dataSource'],
      consumerGroup: 'g',
      subscriptions: ['t'],
      handlers: [{ eventType: 'ItemAdded', eventVersion: 1, handle: async () => undefined }],
    };
    const bad = (over: Record<string, unknown>) => () =>
      new IdempotentConsumer({ ...base, ...over } as IdempotentConsumerOptions);
    expect(bad({ concurrency: 0 })).toThrow(
      'Invalid option concurrency: got 0; expected an integer from 1 to 256',
    );
    expect(bad({ gapPolicy: 'skip' })).toThrow(
      'Invalid option gapPolicy: got "skip"; expected "hold" or "accept"',
    );
    expect(bad({ subscriptions: [] })).toThrow(/Invalid option subscriptions: got array of length 0/);
    expect(bad({ handlers: [{ eventType: 'A', eventVersion: 0, handle: () => 1 }] })).toThrow(
      'Invalid option handlers[0].eventVersion: got 0; expected an integer from 1 to 2147483647',
    );
    expect(bad({ invisibleDurationMs: 1000 })).toThrow(
      /invisibleDurationMs: got 1000; expected an integer from 10000/,
    );
    expect(bad({ consumerGroup: 'a b' })).toThrow(/Invalid option consumerGroup: got "a b"/);
    expect(bad({ colour: 'red' })).toThrow(
      /Invalid option options\.colour: got "red"; expected no such option/,
    );
    expect(bad({ retry: { initialDelayMs: 5000, maxDelayMs: 100 } })).toThrow(/retry\.maxDelayMs: got 100/);
    expect(bad({ concurrency: 0 })).toThrow(InvalidOptionError);
  });
});
