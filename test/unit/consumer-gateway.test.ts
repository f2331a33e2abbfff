import { AckBatcher } from '../../src/broker/ackBatcher';
import { ReceiveLanes } from '../../src/broker/receiveLanes';

/** A sender whose requests the test answers by hand. */
function manualSender() {
  const requests: Array<{
    key: string;
    items: number[];
    answer: (r: Array<Error | undefined> | Error) => void;
  }> = [];
  const send = (key: string, items: readonly number[]) =>
    new Promise<ReadonlyArray<Error | undefined>>((resolve, reject) =>
      requests.push({ key, items: [...items], answer: (r) => (r instanceof Error ? reject(r) : resolve(r)) }),
    );
  return { requests, send };
}

const turn = () => new Promise((r) => setImmediate(r));

describe('AckBatcher', () => {
  it('sends a lone ack on the next turn, and gathers the acks made while requests are out', async () => {
    const s = manualSender();
    const b = new AckBatcher<number>(s.send, 32, 1);
    const first = b.add('k', 1);
    await turn();
    expect(s.requests.map((r) => r.items)).toEqual([[1]]);
    const later = [2, 3, 4].map((i) => b.add('k', i));
    await turn();
    expect(s.requests).toHaveLength(1); // one in flight at most: 2..4 wait for it
    s.requests[0]!.answer([undefined]);
    await first;
    await turn();
    await turn();
    expect(s.requests.map((r) => r.items)).toEqual([[1], [2, 3, 4]]);
    s.requests[1]!.answer([undefined, undefined, undefined]);
    await Promise.all(later);
  });

  it('keeps keys apart, caps a request at maxBatch, and gives each caller its own result', async () => {
    const s = manualSender();
    const b = new AckBatcher<number>(s.send, 2, 2);
    const results = [1, 2, 3].map((i) =>
      b.add('a', i).then(
        () => 'ok',
        (e: Error) => e.message,
      ),
    );
    const other = b.add('b', 9);
    await turn();
    expect(s.requests.map((r) => [r.key, r.items])).toEqual([
      ['a', [1, 2]],
      ['a', [3]],
      ['b', [9]],
    ]);
    s.requests[0]!.answer([undefined, new Error('refused 2')]);
    s.requests[1]!.answer(new Error('connection lost'));
    s.requests[2]!.answer([undefined]);
    expect(await Promise.all(results)).toEqual(['ok', 'refused 2', 'connection lost']);
    await other;
  });
});

describe('ReceiveLanes', () => {
  const lanes = (...keys: string[]) => keys.map((key) => ({ key }));

  it('sends each receive to the lane with the fewest open, so loops spread and none waits behind a parked one', async () => {
    const l = new ReceiveLanes();
    const all = lanes('a', 'b');
    const release: Array<() => void> = [];
    const open = (key: string) => l.within(key, () => new Promise<void>((r) => release.push(r)));
    const first = l.pick(all)!.key;
    const p1 = open(first);
    const second = l.pick(all)!.key;
    expect(second).not.toBe(first);
    const p2 = open(second);
    // Both have one open: a third loop may take either; the lane parked longest is not special.
    const third = l.pick(all)!.key;
    const p3 = open(third);
    // The other lane now has fewer open: the fourth goes there, whatever the rotation says.
    expect(l.pick(all)!.key).toBe(third === 'a' ? 'b' : 'a');
    release.forEach((r) => r());
    await Promise.all([p1, p2, p3]);
    expect(l.pick([])).toBeUndefined();
  });

  it('rotates among lanes with none open', () => {
    const l = new ReceiveLanes();
    const all = lanes('a', 'b', 'c');
    expect([1, 2, 3].map(() => l.pick(all)!.key).sort()).toEqual(['a', 'b', 'c']);
  });
});
