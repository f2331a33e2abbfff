import type { ProducerWindow } from './protocol';

/** Figures of one window (or of all of them: window 'all'). */
export interface ChaosWindowReport {
  window: ProducerWindow | 'all';
  kills: number;
  /** Kills that happened inside the named window (random: every kill). */
  reached: number;
  transactions: number;
  committedTransactions: number;
  committedEvents: number;
  /** Distinct committed events the raw consumer received. */
  deliveredEvents: number;
  /** Committed events never delivered. */
  lost: number;
  /** Delivered events whose transaction did not commit. */
  phantom: number;
  /** Deliveries beyond the first of an event (at-least-once). */
  duplicates: number;
}

export interface ChaosTallyInput {
  /** The windows of the run, in order (the first one takes what no window owns). */
  windows: readonly ProducerWindow[];
  /** Per window: kills, kills inside the window, transactions begun by its processes. */
  kills: ReadonlyMap<ProducerWindow, { kills: number; reached: number; transactions: number }>;
  /** txId -> the window of the process that began it. */
  owner: ReadonlyMap<string, ProducerWindow>;
  /** tx_record status per txId of the run's group. */
  statuses: ReadonlyMap<string, string>;
  /** Events of COMMITTED transactions (the database's truth: what must be delivered). */
  committed: ReadonlyArray<{ eventId: string; txId: string }>;
  /** Every delivery the raw consumer got (one entry per delivery, duplicates included). */
  received: ReadonlyArray<{ eventId: string; txId: string | undefined }>;
}

export interface ChaosTally {
  windows: ChaosWindowReport[];
  total: ChaosWindowReport;
  /** Why the run failed (empty: nothing lost, nothing phantom, something committed). */
  failures: string[];
}

const empty = (window: ProducerWindow | 'all'): ChaosWindowReport => ({
  window,
  kills: 0,
  reached: 0,
  transactions: 0,
  committedTransactions: 0,
  committedEvents: 0,
  deliveredEvents: 0,
  lost: 0,
  phantom: 0,
  duplicates: 0,
});

/**
 * The verdict of a run: per window, committed events delivered or lost (committed, never
 * received), phantoms (received, never committed) and duplicates (deliveries beyond the first).
 */
export function tallyChaos(input: ChaosTallyInput): ChaosTally {
  const rows = new Map<ProducerWindow, ChaosWindowReport>();
  for (const w of input.windows) {
    const k = input.kills.get(w) ?? { kills: 0, reached: 0, transactions: 0 };
    rows.set(w, { ...empty(w), kills: k.kills, reached: k.reached, transactions: k.transactions });
  }
  const rowOf = (txId: string | undefined) => rows.get(input.owner.get(txId ?? '') ?? input.windows[0]!)!;
  for (const [txId, status] of input.statuses)
    if (status === 'COMMITTED' && input.owner.has(txId)) rowOf(txId).committedTransactions++;
  const copies = new Map<string, { txId: string | undefined; n: number }>();
  for (const m of input.received) {
    const c = copies.get(m.eventId) ?? { txId: m.txId, n: 0 };
    c.n++;
    copies.set(m.eventId, c);
  }
  const committedIds = new Set<string>();
  for (const e of input.committed) {
    committedIds.add(e.eventId);
    const row = rowOf(e.txId);
    row.committedEvents++;
    if (copies.has(e.eventId)) row.deliveredEvents++;
    else row.lost++;
  }
  for (const [id, c] of copies) {
    const row = rowOf(c.txId);
    row.duplicates += c.n - 1;
    if (!committedIds.has(id)) row.phantom++;
  }
  const windows = [...rows.values()];
  const total = empty('all');
  for (const r of windows) {
    total.kills += r.kills;
    total.reached += r.reached;
    total.transactions += r.transactions;
    total.committedTransactions += r.committedTransactions;
    total.committedEvents += r.committedEvents;
    total.deliveredEvents += r.deliveredEvents;
    total.lost += r.lost;
    total.phantom += r.phantom;
    total.duplicates += r.duplicates;
  }
  const failures: string[] = [];
  if (total.lost > 0) failures.push(`${total.lost} committed events were never delivered`);
  if (total.phantom > 0) failures.push(`${total.phantom} delivered events never committed`);
  if (total.committedEvents === 0) failures.push('no transaction committed: the run proves nothing');
  return { windows, total, failures };
}
