import { InvalidMessageError } from '../../src';
import { prepareEvents } from '../../src/outbox/events';

const rules = { topics: ['orders_tx'], maxMessageBytes: 1024, producerGroup: 'orders' };
const TX = '0192f1a4-0000-7000-8000-000000000000';

function rejection(input: unknown): InvalidMessageError {
  try {
    prepareEvents(input, TX, rules);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidMessageError);
    return err as InvalidMessageError;
  }
  throw new Error('expected rejection');
}

describe('event preparation', () => {
  it('snapshots a JSON body at call time', () => {
    const data = { orderId: 'o-1', total: 10 };
    const [e] = prepareEvents({ topic: 'orders_tx', body: data }, TX, rules);
    data.total = 99;
    expect(JSON.parse(e!.message.body.toString())).toEqual({ orderId: 'o-1', total: 10 });
  });

  it('copies a Buffer body so later mutation does not change the event', () => {
    const buf = Buffer.from('abc');
    const [e] = prepareEvents({ topic: 'orders_tx', body: buf }, TX, rules);
    buf.write('xyz');
    expect(e!.message.body.toString()).toBe('abc');
  });

  it('keeps a caller eventId and puts it first in keys', () => {
    const eventId = '0192f1a4-1111-7000-8000-000000000001';
    const [e] = prepareEvents({ topic: 'orders_tx', body: 'x', eventId, keys: ['k1'] }, TX, rules);
    expect(e!.eventId).toBe(eventId);
    expect(e!.message.keys).toEqual([eventId, 'k1']);
    expect(e!.message.properties).toEqual({ TX_ID: TX, TX_ORIGIN: 'orders', EVENT_ID: eventId });
  });

  it.each([
    [{ topic: 'nope', body: 'x' }, 'event.topic'],
    [{ topic: 'orders_tx' }, 'event.body'],
    [{ topic: 'orders_tx', body: '' }, 'event.body'],
    [{ topic: 'orders_tx', body: Buffer.alloc(0) }, 'event.body'],
    [{ topic: 'orders_tx', body: 'x'.repeat(1025) }, 'event.body'],
    [{ topic: 'orders_tx', body: { big: 1n } }, 'event.body'],
    [{ topic: 'orders_tx', body: 'x', tag: 'a|b' }, 'event.tag'],
    [{ topic: 'orders_tx', body: 'x', keys: [' '] }, 'event.keys[0]'],
    [{ topic: 'orders_tx', body: 'x', keys: 'k' }, 'event.keys'],
    [{ topic: 'orders_tx', body: 'x', properties: { TX_ID: 'spoof' } }, 'event.properties.TX_ID'],
    [{ topic: 'orders_tx', body: 'x', properties: { n: 1 } }, 'event.properties.n'],
    [{ topic: 'orders_tx', body: 'x', eventId: 'not-a-uuid' }, 'event.eventId'],
    [{ topic: 'orders_tx', body: 'x', bdy: 'typo' }, 'event.bdy'],
    ['just a string', 'event'],
    [[], 'events'],
  ])('rejects %p at %s', (input, path) => {
    const err = rejection(input);
    expect(err.path).toBe(path);
    expect(err.message).toContain(path);
    expect(err.code).toBe('INVALID_MESSAGE');
  });

  it('names the index of the bad event in a list', () => {
    expect(
      rejection([
        { topic: 'orders_tx', body: 'ok' },
        { topic: 'orders_tx', body: 5, tag: '' },
      ]).path,
    ).toBe('events[1].tag');
  });

  it('rejects a cyclic body with the JSON error as cause', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const err = rejection({ topic: 'orders_tx', body: cyclic });
    expect(err.cause).toBeInstanceOf(TypeError);
  });
});
