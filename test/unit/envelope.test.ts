import { createEnvelope, defineEvent, InvalidMessageError, parseEnvelope } from '../../src';
import { prepareEvents } from '../../src/outbox/events';

const rules = { topics: ['t'], maxMessageBytes: 4 * 1024 * 1024, producerGroup: 'pg' };
const OrderPlaced = defineEvent<{ orderId: string; lines: Array<{ sku: string }> }>({
  eventType: 'OrderPlaced',
  eventVersion: 1,
  aggregateType: 'Order',
});

describe('event envelope', () => {
  it('createEnvelope: UUIDv7 eventId, ISO-8601 UTC occurredAt, deep snapshot of data, frozen', () => {
    const data = { orderId: 'o1', lines: [{ sku: 'a' }] };
    const e = OrderPlaced.create({ aggregateId: 'o1', aggregateVersion: 1, data });
    expect(e.eventId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(e.occurredAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    data.lines.push({ sku: 'b' });
    expect(e.data.lines).toEqual([{ sku: 'a' }]);
    expect(Object.isFrozen(e.data.lines)).toBe(true);
    expect(e.traceId).toBeNull();
  });

  it('a republish keeps the eventId it is given', () => {
    const first = OrderPlaced.create({
      aggregateId: 'o1',
      aggregateVersion: 1,
      data: { orderId: 'o1', lines: [] },
    });
    const again = OrderPlaced.create({ ...first, data: first.data });
    expect(again.eventId).toBe(first.eventId);
  });

  it('rejects entity instances, Dates and NaN in data with the field path', () => {
    class OrderEntity {
      id = 'o1';
    }
    expect(() =>
      createEnvelope({
        eventType: 'A',
        eventVersion: 1,
        aggregateType: 'X',
        aggregateId: 'x',
        aggregateVersion: 1,
        data: { order: new OrderEntity() },
      }),
    ).toThrow(
      /Invalid message envelope\.data\.order: got object \[object Object\]; expected a plain object snapshot, not an instance of OrderEntity/,
    );
    expect(() =>
      createEnvelope({
        eventType: 'A',
        eventVersion: 1,
        aggregateType: 'X',
        aggregateId: 'x',
        aggregateVersion: 1,
        data: { at: new Date() },
      }),
    ).toThrow(/envelope\.data\.at: .*not an instance of Date/);
    expect(() =>
      createEnvelope({
        eventType: 'A',
        eventVersion: 1,
        aggregateType: 'X',
        aggregateId: 'x',
        aggregateVersion: 1,
        data: [1, NaN],
      }),
    ).toThrow('Invalid message envelope.data[1]: got NaN; expected a finite number');
    expect(() =>
      createEnvelope({
        eventType: 'A',
        eventVersion: 1,
        aggregateType: 'X',
        aggregateId: 'has space',
        aggregateVersion: 1,
        data: null,
      }),
    ).toThrow(/envelope\.aggregateId: got "has space"/);
  });

  it('transact with an envelope: body is its JSON, eventId is its id, keys and properties carry the aggregate', () => {
    const e = OrderPlaced.create({
      aggregateId: 'o-9',
      aggregateVersion: 3,
      data: { orderId: 'o-9', lines: [] },
    });
    const [p] = prepareEvents({ topic: 't', event: e, keys: ['extra'] }, 'tx1', rules);
    expect(p!.eventId).toBe(e.eventId);
    expect(p!.message.keys).toEqual([e.eventId, 'o-9', 'extra']);
    expect(p!.message.properties).toMatchObject({
      TX_ID: 'tx1',
      EVENT_ID: e.eventId,
      EVENT_TYPE: 'OrderPlaced',
      AGGREGATE_ID: 'o-9',
    });
    expect(parseEnvelope(p!.message.body, 1 << 20)).toEqual(e);
  });

  it('transact with an envelope: the snapshot is taken at call time, never a live reference', () => {
    const data = { orderId: 'o1', lines: [{ sku: 'a' }] };
    const raw = {
      eventId: '0190a0a0-0000-7000-8000-000000000000',
      eventType: 'OrderPlaced',
      eventVersion: 1,
      aggregateType: 'Order',
      aggregateId: 'o1',
      aggregateVersion: 1,
      occurredAt: '2025-12-02T10:00:00.000Z',
      traceId: null,
      data,
    };
    const [p] = prepareEvents({ topic: 't', event: raw }, 'tx1', rules);
    data.lines.push({ sku: 'mutated' });
    expect(JSON.parse(p!.message.body.toString()).data.lines).toEqual([{ sku: 'a' }]);
  });

  it('transact rejects a bad envelope naming the field path, and body or eventId beside it', () => {
    const e = OrderPlaced.create({
      aggregateId: 'o1',
      aggregateVersion: 1,
      data: { orderId: 'o1', lines: [] },
    });
    expect(() => prepareEvents({ topic: 't', event: { ...e, aggregateVersion: 0 } }, 'tx', rules)).toThrow(
      'Invalid message event.event.aggregateVersion: got 0; expected an integer from 1 to 9007199254740991',
    );
    expect(() => prepareEvents({ topic: 't', event: { ...e, extra: 1 } as never }, 'tx', rules)).toThrow(
      /event\.event\.extra: got 1; expected no such field/,
    );
    expect(() => prepareEvents({ topic: 't', event: e, body: 'x' } as never, 'tx', rules)).toThrow(
      InvalidMessageError,
    );
    expect(() =>
      prepareEvents({ topic: 't', event: e, properties: { EVENT_TYPE: 'x' } }, 'tx', rules),
    ).toThrow(/properties\.EVENT_TYPE: got "x"; expected no value: EVENT_TYPE is set by rocketmq-tx/);
  });

  it('consumer side tolerates unknown envelope fields (forward compatibility)', () => {
    const e = OrderPlaced.create({
      aggregateId: 'o1',
      aggregateVersion: 1,
      data: { orderId: 'o1', lines: [] },
    });
    expect(parseEnvelope(Buffer.from(JSON.stringify({ ...e, schemaHint: 'v2' })), 1 << 20)).toEqual(e);
  });
});
