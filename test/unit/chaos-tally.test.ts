// The chaos runner's verdict (src/testing/chaos/tally.ts): what makes
// test/integration/chaos.isolated.test.ts fail. A committed event never received is lost, a
// received event whose transaction did not commit is phantom; both fail the run.
import { tallyChaos, type ChaosTallyInput } from '../../src/testing/chaos/tally';

const base = (over: Partial<ChaosTallyInput> = {}): ChaosTallyInput => ({
  windows: ['random', 'after-commit'],
  kills: new Map([
    ['random', { kills: 1, reached: 1, transactions: 1 }],
    ['after-commit', { kills: 1, reached: 1, transactions: 2 }],
  ]),
  owner: new Map([
    ['t1', 'random'],
    ['t2', 'after-commit'],
    ['t3', 'after-commit'],
  ]),
  statuses: new Map([
    ['t1', 'COMMITTED'],
    ['t2', 'COMMITTED'],
    ['t3', 'ROLLED_BACK'],
  ]),
  committed: [
    { eventId: 'e1', txId: 't1' },
    { eventId: 'e2', txId: 't2' },
  ],
  received: [
    { eventId: 'e1', txId: 't1' },
    { eventId: 'e2', txId: 't2' },
  ],
  ...over,
});

describe('tallyChaos', () => {
  it('everything committed delivered once: no failure', () => {
    const t = tallyChaos(base());
    expect(t.failures).toEqual([]);
    expect(t.total).toMatchObject({
      kills: 2,
      committedTransactions: 2,
      committedEvents: 2,
      deliveredEvents: 2,
    });
    expect(t.total).toMatchObject({ lost: 0, phantom: 0, duplicates: 0 });
  });

  it('a committed event never received is lost, in the window of its transaction', () => {
    const t = tallyChaos(base({ received: [{ eventId: 'e1', txId: 't1' }] }));
    expect(t.total.lost).toBe(1);
    expect(t.windows.find((w) => w.window === 'after-commit')).toMatchObject({ lost: 1, deliveredEvents: 0 });
    expect(t.failures).toEqual(['1 committed events were never delivered']);
  });

  it('a received event of a rolled-back transaction is phantom', () => {
    const t = tallyChaos(base({ received: [...base().received, { eventId: 'e3', txId: 't3' }] }));
    expect(t.total.phantom).toBe(1);
    expect(t.failures).toEqual(['1 delivered events never committed']);
  });

  it('a second delivery is a duplicate, not a failure', () => {
    const t = tallyChaos(base({ received: [...base().received, { eventId: 'e2', txId: 't2' }] }));
    expect(t.total.duplicates).toBe(1);
    expect(t.failures).toEqual([]);
  });

  it('nothing committed fails the run (it proves nothing)', () => {
    const t = tallyChaos(base({ committed: [], received: [], statuses: new Map() }));
    expect(t.failures).toEqual(['no transaction committed: the run proves nothing']);
  });
});
