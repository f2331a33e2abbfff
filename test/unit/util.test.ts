import { uuidv7 } from '../../src';
import { isUuid } from '../../src/util/uuidv7';
import { Semaphore } from '../../src/util/semaphore';

describe('uuidv7', () => {
  it('has version 7 and the RFC variant, and encodes the current timestamp', () => {
    const before = Date.now();
    const id = uuidv7();
    const after = Date.now();
    expect(isUuid(id)).toBe(true);
    expect(id[14]).toBe('7');
    expect(['8', '9', 'a', 'b']).toContain(id[19]);
    const ms = parseInt(id.replace(/-/g, '').slice(0, 12), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(after);
  });

  it('is strictly increasing within one process, even in one millisecond', () => {
    const ids = Array.from({ length: 10_000 }, () => uuidv7());
    const ms = new Set(ids.map((id) => id.slice(0, 13)));
    expect(ms.size).toBeLessThan(ids.length); // several ids did share a millisecond
    const sorted = [...ids].sort();
    expect(sorted).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('Semaphore', () => {
  it('admits up to permits, queues up to maxQueue, refuses beyond', async () => {
    const s = new Semaphore(2, 1);
    const a = await s.acquire();
    const b = await s.acquire();
    expect(a && b).toBeTruthy();
    const queued = s.acquire();
    expect(s.queued).toBe(1);
    expect(await s.acquire()).toBeUndefined();
    a!();
    const c = await queued;
    expect(c).toBeDefined();
    expect(s.inUse).toBe(2);
    a!(); // double release is ignored
    expect(s.inUse).toBe(2);
    b!();
    c!();
    expect(s.inUse).toBe(0);
  });
});
