import type { DataSource } from 'typeorm';
import type { StatusReport } from '../observability/status';
import type { DialectName } from '../store/typeorm/dialect';
import { doctorQueries, type LockWaitSetting } from '../store/typeorm/doctorQueries';
import type { ResolvedDoctorOptions } from './options';
import { check, formatDuration, type DoctorCheck } from './report';

/** The broker's check-back horizon: after it a half message nobody answered is discarded. */
export function brokerHorizonMs(
  o: Pick<ResolvedDoctorOptions, 'brokerTxTimeoutMs' | 'brokerCheckMax' | 'brokerCheckIntervalMs'>,
): number {
  return o.brokerTxTimeoutMs + o.brokerCheckMax * o.brokerCheckIntervalMs;
}

export function horizonText(o: Parameters<typeof brokerHorizonMs>[0]): string {
  return (
    `broker check horizon ${formatDuration(brokerHorizonMs(o))} ` +
    `(${o.brokerTxTimeoutMs} ms + ${o.brokerCheckMax} x ${o.brokerCheckIntervalMs} ms)`
  );
}

const ISOLATION_OK = 'REPEATABLE-READ or READ-COMMITTED';

const PG_ISOLATION_OK = 'READ-COMMITTED (PostgreSQL runs READ-UNCOMMITTED as READ-COMMITTED)';

/** The session default isolation level of a new connection. */
export function isolationCheck(isolation: string, dialect: DialectName = 'mysql'): DoctorCheck {
  const level = isolation.toUpperCase().replace(/[ _]/g, '-');
  if (dialect === 'postgres') {
    if (level === 'READ-COMMITTED' || level === 'READ-UNCOMMITTED') {
      return check('database settings', 'db.isolation', 'pass', level, { threshold: PG_ISOLATION_OK });
    }
    return check('database settings', 'db.isolation', 'warn', level, {
      threshold: PG_ISOLATION_OK,
      advice:
        'under REPEATABLE READ or SERIALIZABLE a statement that meets a concurrent update fails with 40001 ' +
        '(ON CONFLICT included) instead of waiting: the SDK pins READ COMMITTED for its own transactions, ' +
        "yours may fail more; set default_transaction_isolation = 'read committed' (the PostgreSQL default)",
    });
  }
  if (level === 'REPEATABLE-READ' || level === 'READ-COMMITTED') {
    return check('database settings', 'db.isolation', 'pass', level, { threshold: ISOLATION_OK });
  }
  if (level === 'SERIALIZABLE') {
    return check('database settings', 'db.isolation', 'warn', level, {
      threshold: ISOLATION_OK,
      advice:
        'plain reads become locking reads: more lock waits and deadlocks on tx_record/outbox_event; ' +
        'set transaction_isolation = REPEATABLE-READ (the InnoDB default)',
    });
  }
  return check('database settings', 'db.isolation', 'fail', level, {
    threshold: ISOLATION_OK,
    advice:
      "the fence's plain read would see an uncommitted tx_record row and answer COMMIT for a transaction " +
      'that may still roll back: set transaction_isolation = REPEATABLE-READ',
  });
}

/**
 * PostgreSQL's lock_timeout (what business transactions get; 0 = wait forever) against the
 * broker's horizon. The fence sets its own lock_timeout for its statement.
 */
export function pgLockTimeoutCheck(lockTimeoutMs: number | null, o: ResolvedDoctorOptions): DoctorCheck {
  const value =
    `lock_timeout ${lockTimeoutMs === null ? '0 (no bound)' : formatDuration(lockTimeoutMs)}; the fence sets ` +
    `${o.lockWaitTimeoutMs} ms for its own statement (checkBack.lockWaitTimeoutMs)`;
  const threshold = `< ${horizonText(o)}`;
  if (lockTimeoutMs !== null && lockTimeoutMs < brokerHorizonMs(o)) {
    return check('database settings', 'db.lock-wait-timeout', 'pass', value, { threshold });
  }
  return check('database settings', 'db.lock-wait-timeout', 'warn', value, {
    threshold,
    advice:
      'a business transaction that waits this long on a lock keeps its tx_record row uncommitted past the ' +
      "broker's last check-back: the half message is discarded and the event waits for the discard " +
      "horizon; set lock_timeout (e.g. ALTER ROLE app SET lock_timeout = '10s') or keep transactions short",
  });
}

/**
 * innodb_lock_wait_timeout of a connection from the DataSource (what business transactions get:
 * the server's default, or what the pool sets per connection) against the broker's horizon.
 */
export function lockWaitCheck(lockWaitSeconds: number, o: ResolvedDoctorOptions): DoctorCheck {
  const fenceSeconds = Math.max(1, Math.ceil(o.lockWaitTimeoutMs / 1000));
  const value =
    `innodb_lock_wait_timeout ${lockWaitSeconds} s; the fence sets ${fenceSeconds} s for its own ` +
    `statement (checkBack.lockWaitTimeoutMs ${o.lockWaitTimeoutMs} ms, whole seconds)`;
  const threshold = `< ${horizonText(o)}`;
  if (lockWaitSeconds * 1000 < brokerHorizonMs(o)) {
    return check('database settings', 'db.lock-wait-timeout', 'pass', value, { threshold });
  }
  return check('database settings', 'db.lock-wait-timeout', 'warn', value, {
    threshold,
    advice:
      'a business transaction that waits this long on a lock keeps its tx_record row uncommitted past the ' +
      "broker's last check-back: the half message is discarded and the event waits for the discard " +
      'horizon; lower innodb_lock_wait_timeout (e.g. 10: SET GLOBAL, or SET SESSION on each connection of ' +
      'your pool) or keep transactions short',
  });
}

/** Backlog, oldest undelivered age and DEAD rows, from collectStatus. */
export function outboxChecks(s: StatusReport, o: ResolvedDoctorOptions): DoctorCheck[] {
  const newRows = s.outbox.byStatus.NEW;
  const worstTopic = (pick: (c: StatusReport['outbox']) => number | null) => {
    let best: { topic: string; v: number } | undefined;
    for (const [topic, c] of Object.entries(s.outbox.byTopic)) {
      const v = pick(c as StatusReport['outbox']);
      if (v !== null && v > 0 && (!best || v > best.v)) best = { topic, v };
    }
    return best ? ` (most: ${best.topic})` : '';
  };
  const backlog = check(
    'outbox',
    'outbox.backlog',
    newRows > o.maxBacklog ? 'warn' : 'pass',
    `${newRows} NEW row${newRows === 1 ? '' : 's'}${newRows > 0 ? worstTopic((c) => c.byStatus.NEW) : ''}`,
    {
      threshold: `<= ${o.maxBacklog}`,
      advice:
        newRows > o.maxBacklog
          ? 'the relay is behind or not running: check `rocketmq-tx relay` processes and their progress lines; ' +
            'add relays or raise --batch-size'
          : '',
    },
  );
  const age = s.outbox.oldestUndeliveredAgeMs;
  const undelivered = check(
    'outbox',
    'outbox.oldest-undelivered',
    age !== null && age > o.maxUndeliveredAgeMs ? 'fail' : 'pass',
    age === null
      ? 'nothing undelivered'
      : `${formatDuration(age)} (${s.outbox.undelivered} undelivered)${worstTopic((c) => c.oldestUndeliveredAgeMs)}`,
    {
      threshold: `<= ${formatDuration(o.maxUndeliveredAgeMs)}`,
      advice:
        age !== null && age > o.maxUndeliveredAgeMs
          ? 'a committed event is stuck: is a relay running for its topic (rocketmq-tx relay --topics ...), ' +
            'and discard recovery on? `rocketmq-tx status` shows which topic'
          : '',
    },
  );
  const deadRows = s.outbox.dead;
  const dead = check(
    'outbox',
    'outbox.dead',
    deadRows > o.maxDead ? 'fail' : 'pass',
    `${deadRows} DEAD row${deadRows === 1 ? '' : 's'}${deadRows > 0 ? worstTopic((c) => c.byStatus.DEAD) : ''}`,
    {
      threshold: `<= ${o.maxDead}`,
      advice:
        deadRows > o.maxDead
          ? 'the relay gave up on these events: `rocketmq-tx dead-letter list`, fix the cause, then ' +
            '`rocketmq-tx dead-letter replay --event-id ...`'
          : '',
    },
  );
  return [backlog, undelivered, dead];
}

/**
 * Committed transactions whose broker commit is unconfirmed (collectStatus's inDoubt, split by
 * state with the stated discard horizon): `overdue` ones fail (past the horizon and nobody took
 * them for republishing); ones still awaiting the broker past its check horizon, or being
 * republished, warn.
 */
export function inDoubtCheck(s: StatusReport, o: ResolvedDoctorOptions): DoctorCheck {
  const horizon = brokerHorizonMs(o);
  const d = s.inDoubt;
  const { awaitingBroker, overdue, republishing } = d.byState;
  const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
  const value =
    d.events === 0
      ? 'none'
      : `${plural(d.transactions, 'transaction')}, oldest ${formatDuration(d.oldestAgeMs ?? 0)}; ` +
        `events awaiting the broker ${awaitingBroker.events}, overdue ${overdue.events}, republishing ${republishing.events}`;
  const threshold =
    `no overdue event (past the discard horizon ${formatDuration(o.discardHorizonMs)}, not taken); ` +
    `warn: awaiting the broker > ${formatDuration(horizon)} (broker horizon), or republishing`;
  if (overdue.events > 0) {
    return check('in-doubt transactions', 'tx.in-doubt', 'fail', value, {
      threshold,
      advice:
        'nothing takes them for republishing: keep the producers of their group running with discardRecovery ' +
        'on (the default), or run `rocketmq-tx relay` with discard reconciliation (not --no-discard-reconcile)',
    });
  }
  if ((awaitingBroker.oldestAgeMs ?? 0) > horizon) {
    return check('in-doubt transactions', 'tx.in-doubt', 'warn', value, {
      threshold,
      advice:
        'the broker has stopped checking them (producer down, check-backs unanswered, or the confirmation was lost ' +
        'with a killed process); discard recovery republishes them at the discard horizon: check the producers run',
    });
  }
  if (republishing.events > 0) {
    return check('in-doubt transactions', 'tx.in-doubt', 'warn', value, {
      threshold,
      advice:
        'a discard recovery is republishing them; rows with attempts > 0 failed before: see their last_error ' +
        '(rocketmq-tx status, outbox_event.last_error)',
    });
  }
  return check('in-doubt transactions', 'tx.in-doubt', 'pass', value, { threshold });
}

/** Age of the oldest SENT row against the retention the user states. */
export function retentionCheck(oldestSentAgeMs: number | null, o: ResolvedDoctorOptions): DoctorCheck {
  if (o.retentionMs === undefined) {
    return check(
      'retention',
      'retention.oldest-sent',
      'skip',
      oldestSentAgeMs === null ? 'no SENT rows' : `oldest SENT ${formatDuration(oldestSentAgeMs)}`,
      {
        advice: 'give your retention (--retention 7d) to check that archival keeps up',
      },
    );
  }
  const limit = o.retentionMs + o.retentionGraceMs;
  const value = oldestSentAgeMs === null ? 'no SENT rows' : `oldest SENT ${formatDuration(oldestSentAgeMs)}`;
  const threshold = `<= ${formatDuration(limit)} (retention ${formatDuration(o.retentionMs)} + grace ${formatDuration(o.retentionGraceMs)})`;
  if (oldestSentAgeMs !== null && oldestSentAgeMs > limit) {
    return check('retention', 'retention.oldest-sent', 'warn', value, {
      threshold,
      advice:
        'archival is not keeping up: schedule `rocketmq-tx archive --older-than <retention>` (or --purge), ' +
        'and check it ends without errors',
    });
  }
  return check('retention', 'retention.oldest-sent', 'pass', value, { threshold });
}

export const CLOCK_WARN_MS = 1000;
export const CLOCK_FAIL_MS = 30_000;

/** Skew between this host and the database, minus half the round trip (what it could be off by). */
export function clockCheck(measured: { skewMs: number; rttMs: number }): DoctorCheck {
  const uncertainty = measured.rttMs / 2;
  const skew = Math.max(0, Math.abs(measured.skewMs) - uncertainty);
  const ahead = measured.skewMs > 0 ? ' database ahead' : measured.skewMs < 0 ? ' database behind' : '';
  const value = `${formatDuration(Math.abs(measured.skewMs))}${ahead} (± ${formatDuration(uncertainty)})`;
  const threshold = `warn > ${formatDuration(CLOCK_WARN_MS)}, fail > ${formatDuration(CLOCK_FAIL_MS)}`;
  const advice =
    'run NTP (chrony) on this host and the database host: ages and leases are computed on the database ' +
    'clock while timeouts run on this one';
  if (skew > CLOCK_FAIL_MS) return check('clock', 'clock.skew', 'fail', value, { threshold, advice });
  if (skew > CLOCK_WARN_MS) return check('clock', 'clock.skew', 'warn', value, { threshold, advice });
  return check('clock', 'clock.skew', 'pass', value, { threshold });
}

/** The measurements behind the checks above (one short statement each; no locks). */
export function readIsolation(ds: DataSource): Promise<string> {
  return doctorQueries(ds).isolation(ds);
}

export function readLockWait(ds: DataSource): Promise<LockWaitSetting> {
  return doctorQueries(ds).lockWait(ds);
}

/** SENT rows' next_attempt_at is at most one lease before their publish (the index Retention reads too). */
export async function readOldestSentAgeMs(ds: DataSource): Promise<number | null> {
  const us = await doctorQueries(ds).oldestSentAgeUs(ds);
  return us === null || us === undefined ? null : Math.max(0, Math.floor(Number(us) / 1000));
}

export async function readClock(
  ds: DataSource,
  now: () => number = Date.now,
): Promise<{ skewMs: number; rttMs: number }> {
  const q = doctorQueries(ds);
  const before = now();
  const t = await q.clock(ds);
  const after = now();
  const dbMs = Number(t) * 1000;
  return { skewMs: Math.round(dbMs - (before + after) / 2), rttMs: after - before };
}
