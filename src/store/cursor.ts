import type { CursorKey, InboxTransaction } from './ports';

/** Whether an event of `version` moves a cursor at `last`: the next version, or any later one when gaps are accepted. */
export function cursorAdvances(last: number, version: number, acceptGap: boolean): boolean {
  return version === last + 1 || (acceptGap && version > last + 1);
}

/** claimVersion as two statements (lock, then advance if it moves), for stores without a one-statement form. */
export async function claimInTwoSteps(
  tx: Pick<InboxTransaction, 'lockCursor' | 'advanceCursor'>,
  key: CursorKey,
  version: number,
  acceptGap: boolean,
): Promise<number> {
  const last = await tx.lockCursor(key);
  if (cursorAdvances(last, version, acceptGap)) await tx.advanceCursor(key, version, version - last - 1);
  return last;
}
