/** The doctor's result types and how checks add up to a verdict and an exit code. */

/** pass; warn (works, but at risk: look at it); fail (broken or about to break); skip (not checked, and why). */
export type DoctorStatus = 'pass' | 'warn' | 'fail' | 'skip';

/** The checklist items, in the order they are reported. */
export const DOCTOR_GROUPS = [
  'schema',
  'database settings',
  'grants',
  'outbox',
  'in-doubt transactions',
  'retention',
  'clock',
  'broker',
  'options',
] as const;

export type DoctorGroup = (typeof DOCTOR_GROUPS)[number];

export interface DoctorCheck {
  /** Stable id, e.g. `schema.outbox_event`, `broker.topic.orders_tx`, `outbox.dead`. */
  id: string;
  group: DoctorGroup;
  status: DoctorStatus;
  /** What was measured (never a secret). */
  value: string;
  /** What it was compared with; '' when there is no threshold. */
  threshold: string;
  /** What to do when it is not a pass (or why it was skipped); '' on a plain pass. */
  advice: string;
}

/**
 * What {@link runDoctor} returns: JSON-serializable, stable shape (fields are only added).
 * `exitCode` is what `rocketmq-tx doctor` exits with: 0 all pass, 1 a warning, 2 a failure.
 */
export interface DoctorReport {
  generatedAt: string;
  status: 'pass' | 'warn' | 'fail';
  exitCode: 0 | 1 | 2;
  counts: Record<DoctorStatus, number>;
  /** Grouped in {@link DOCTOR_GROUPS} order, in the order they ran within a group. */
  checks: DoctorCheck[];
}

/** The worst status of the checks (a skip counts as a pass). */
export function verdict(checks: readonly DoctorCheck[]): DoctorReport['status'] {
  if (checks.some((c) => c.status === 'fail')) return 'fail';
  if (checks.some((c) => c.status === 'warn')) return 'warn';
  return 'pass';
}

export function exitCodeOf(status: DoctorReport['status']): DoctorReport['exitCode'] {
  return status === 'fail' ? 2 : status === 'warn' ? 1 : 0;
}

/** Orders the checks by group (stable within a group) and adds the verdict. */
export function buildReport(checks: readonly DoctorCheck[], now: Date = new Date()): DoctorReport {
  const order = (g: DoctorGroup) => DOCTOR_GROUPS.indexOf(g);
  const sorted = checks
    .map((c, i) => ({ c, i }))
    .sort((a, b) => order(a.c.group) - order(b.c.group) || a.i - b.i)
    .map((x) => x.c);
  const counts: Record<DoctorStatus, number> = { pass: 0, warn: 0, fail: 0, skip: 0 };
  for (const c of sorted) counts[c.status]++;
  const status = verdict(sorted);
  return { generatedAt: now.toISOString(), status, exitCode: exitCodeOf(status), counts, checks: sorted };
}

/** A check with empty threshold and advice filled in. */
export function check(
  group: DoctorGroup,
  id: string,
  status: DoctorStatus,
  value: string,
  more: { threshold?: string; advice?: string } = {},
): DoctorCheck {
  return { id, group, status, value, threshold: more.threshold ?? '', advice: more.advice ?? '' };
}

/** "850 ms", "2 s", "5 min", "1.5 h", "3 d": for values and thresholds. */
export function formatDuration(ms: number): string {
  const abs = Math.abs(ms);
  const fmt = (n: number, unit: string) => `${Number.isInteger(n) ? n : n.toFixed(1)} ${unit}`;
  if (abs < 1000) return `${Math.round(ms)} ms`;
  if (abs < 60_000) return fmt(Math.round(ms / 100) / 10, 's');
  if (abs < 3_600_000) return fmt(Math.round(ms / 6000) / 10, 'min');
  if (abs < 86_400_000) return fmt(Math.round(ms / 360_000) / 10, 'h');
  return fmt(Math.round(ms / 8_640_000) / 10, 'd');
}
