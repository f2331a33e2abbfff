import { AsyncLocalStorage } from 'node:async_hooks';
import * as api from '@opentelemetry/api';
import { TransactionalProducer, createEnvelope } from '../../src';
import { activeTrace } from '../../src/observability/tracing';
import { FakeGateway, FakeStore, Journal, fakeDataSource } from './fakes/fakes';

/** The smallest context manager an OpenTelemetry SDK would install (AsyncLocalStorage based). */
class AlsContextManager implements api.ContextManager {
  private readonly als = new AsyncLocalStorage<api.Context>();
  active(): api.Context {
    return this.als.getStore() ?? api.ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    context: api.Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.als.run(context, () => fn.apply(thisArg, args));
  }
  bind<T>(_context: api.Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.als.disable();
    return this;
  }
}

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';

function inSpan<T>(fn: () => T, over: Partial<api.SpanContext> = {}): T {
  const span = api.trace.wrapSpanContext({
    traceId: TRACE_ID,
    spanId: SPAN_ID,
    traceFlags: api.TraceFlags.SAMPLED,
    ...over,
  });
  return api.context.with(api.trace.setSpan(api.context.active(), span), fn);
}

const input = {
  eventType: 'OrderPlaced',
  eventVersion: 1,
  aggregateType: 'Order',
  aggregateId: 'o1',
  aggregateVersion: 1,
  data: { n: 1 },
};

function producer() {
  const journal = new Journal();
  const gateway = new FakeGateway(journal);
  const p = new TransactionalProducer(
    { endpoints: '127.0.0.1:8081', dataSource: fakeDataSource(journal), producerGroup: 'g', topics: ['t'] },
    { gateway: () => gateway, store: new FakeStore(journal), outbox: null },
  );
  return { p, gateway };
}

describe('tracing with @opentelemetry/api and an active span', () => {
  beforeAll(() => {
    expect(api.context.setGlobalContextManager(new AlsContextManager())).toBe(true);
  });
  afterAll(() => api.context.disable());

  it("an envelope built inside a span takes the span's traceId; outside a span it stays null", () => {
    expect(inSpan(() => createEnvelope(input)).traceId).toBe(TRACE_ID);
    expect(createEnvelope(input).traceId).toBeNull();
  });

  it('a traceId (or null) set by the caller is kept', () => {
    expect(inSpan(() => createEnvelope({ ...input, traceId: 'my-trace' })).traceId).toBe('my-trace');
    expect(inSpan(() => createEnvelope({ ...input, traceId: null })).traceId).toBeNull();
  });

  it('an invalid span context is ignored', () => {
    expect(inSpan(() => activeTrace(), { traceId: '00000000000000000000000000000000' })).toBeUndefined();
    expect(inSpan(() => createEnvelope(input), { spanId: '0000000000000000' }).traceId).toBeNull();
  });

  it('transact inside a span copies W3C traceparent (and tracestate) into every message', async () => {
    const { p, gateway } = producer();
    await p.start();
    const traceState = api.createTraceState('vendor=abc,other=1');
    await inSpan(
      () =>
        p.transact(
          [
            { topic: 't', body: 'a' },
            { topic: 't', event: createEnvelope(input) },
          ],
          async () => 1,
        ),
      { traceState },
    );
    expect(gateway.sent).toHaveLength(2);
    for (const m of gateway.sent) {
      expect(m.properties.traceparent).toBe(`00-${TRACE_ID}-${SPAN_ID}-01`);
      expect(m.properties.tracestate).toBe('vendor=abc,other=1');
    }
    // The envelope was built in the span too.
    expect(JSON.parse(gateway.sent[1]!.body.toString()).traceId).toBe(TRACE_ID);
    await p.transact({ topic: 't', body: 'outside' }, async () => 1);
    expect(gateway.sent[2]!.properties.traceparent).toBeUndefined();
    // An unsampled span is still propagated, with its flags.
    await inSpan(() => p.transact({ topic: 't', body: 'x' }, async () => 1), {
      traceFlags: api.TraceFlags.NONE,
    });
    expect(gateway.sent[3]!.properties.traceparent).toBe(`00-${TRACE_ID}-${SPAN_ID}-00`);
    await p.shutdown();
  });
});

describe('tracing without @opentelemetry/api installed', () => {
  afterEach(() => jest.resetModules());

  it('envelopes and messages carry no trace context, and nothing throws', async () => {
    jest.resetModules();
    jest.doMock('@opentelemetry/api', () => {
      throw Object.assign(new Error("Cannot find module '@opentelemetry/api'"), { code: 'MODULE_NOT_FOUND' });
    });
    const sdk = (await import('../../src')) as typeof import('../../src');
    expect(sdk.createEnvelope(input).traceId).toBeNull();
    const journal = new Journal();
    const gateway = new FakeGateway(journal);
    const p = new sdk.TransactionalProducer(
      { endpoints: '127.0.0.1:8081', dataSource: fakeDataSource(journal), producerGroup: 'g', topics: ['t'] },
      { gateway: () => gateway, store: new FakeStore(journal), outbox: null },
    );
    await p.start();
    await p.transact({ topic: 't', body: 'a' }, async () => 1);
    expect(gateway.sent[0]!.properties.traceparent).toBeUndefined();
    await p.shutdown();
  });
});
