import * as net from 'node:net';
import { AuthenticationError, AuthorizationError, InvalidOptionError, TlsError } from '../../src';
import type { TopicRoute } from '../../src/broker/topicRoutes';
import { renderDoctor } from '../../src/cli/doctor';
import { brokerChecks, intendedTypes, optionChecks } from '../../src/doctor/brokerChecks';
import type { DataSource } from 'typeorm';
import {
  clockCheck,
  inDoubtCheck,
  isolationCheck,
  lockWaitCheck,
  pgLockTimeoutCheck,
  outboxChecks,
  readClock,
  readIsolation,
  retentionCheck,
} from '../../src/doctor/databaseChecks';
import { compareGrants, parseGrants, privilegesOn } from '../../src/doctor/grants';
import { resolveDoctorOptions, type DoctorOptions } from '../../src/doctor/options';
import { buildReport, check, type DoctorCheck, type DoctorReport } from '../../src/doctor/report';
import { runDoctor } from '../../src/doctor/runDoctor';
import { adminChecks } from '../../src/doctor/adminChecks';
import { codeChecks } from '../../src/doctor/codeChecks';
import { on } from '../../src/consumer/handlers';
import { readMasters } from '../../src/broker/adminReads';
import {
  compareSchema,
  expectedSchema,
  type ActualSchema,
  type ExpectedTable,
} from '../../src/doctor/schema';
import { shapeStatus, type StatusReport } from '../../src/observability/status';
import { runCli } from './fakes/cli';

const MIN = 60_000;
const opts = (o: DoctorOptions = {}) => resolveDoctorOptions(o);
const byId = (checks: readonly DoctorCheck[], id: string) => {
  const c = checks.find((x) => x.id === id);
  if (!c) throw new Error(`no check ${id} in ${checks.map((x) => x.id).join(', ')}`);
  return c;
};

const cli = runCli;

/** A schema exactly as the migrations create it. */
function actualFrom(expected: readonly ExpectedTable[]): ActualSchema {
  return {
    tables: expected.map((t) => ({ t: t.name, engine: 'InnoDB' })),
    columns: expected.flatMap((t) => t.columns.map((c) => ({ t: t.name, c }))),
    indexes: expected.flatMap((t) => [
      ...t.primaryKey.map((c) => ({ t: t.name, i: 'PRIMARY', nonUnique: 0, c })),
      ...t.indexes.flatMap((ix) =>
        ix.columns.map((c) => ({ t: t.name, i: ix.name, nonUnique: ix.unique ? 0 : 1, c })),
      ),
    ]),
  };
}

const everyone = { visible: () => true, used: () => undefined, optional: () => false };

function status(
  outbox: Array<{
    k: string;
    topic: string | null;
    status: string | null;
    n: number;
    age_us?: number;
    txs?: number;
  }>,
): StatusReport {
  return shapeStatus(
    {
      txRecords: [],
      outbox: outbox.map((r) => ({ age_us: null, txs: null, ...r })),
      consumed: [],
    },
    { topics: null, consumerGroups: null, discardHorizonMs: 20 * MIN },
    new Date(0),
  );
}

describe('doctor: report, grouping and exit codes', () => {
  it('orders checks by checklist item, counts them, and exits 0 / 1 / 2 for pass / warn / fail (skip counts as pass)', () => {
    const pass = check('options', 'o.1', 'pass', 'x');
    const skip = check('retention', 'r.1', 'skip', 'x');
    const warn = check('clock', 'c.1', 'warn', 'x');
    const fail = check('schema', 's.1', 'fail', 'x');
    expect(buildReport([pass, skip]).exitCode).toBe(0);
    expect(buildReport([pass, skip, warn]).exitCode).toBe(1);
    const r = buildReport([pass, warn, fail, skip]);
    expect(r).toMatchObject({ status: 'fail', exitCode: 2, counts: { pass: 1, warn: 1, fail: 1, skip: 1 } });
    expect(r.checks.map((c) => c.group)).toEqual(['schema', 'retention', 'clock', 'options']);
  });

  it('renders one table per checklist item with status, value, threshold and what to do', () => {
    const text = renderDoctor(
      buildReport([
        check('outbox', 'outbox.dead', 'fail', '3 DEAD rows', { threshold: '<= 0', advice: 'replay them' }),
        check('clock', 'clock.skew', 'pass', '12 ms'),
      ]),
    );
    expect(text).toMatch(/== outbox\nstatus +check +value +threshold +what to do\n/);
    expect(text).toMatch(/FAIL +outbox\.dead +3 DEAD rows +<= 0 +replay them/);
    expect(text.indexOf('== outbox')).toBeLessThan(text.indexOf('== clock'));
    expect(text).toMatch(/FAIL: 1 pass, 0 warn, 1 fail, 0 skipped \(exit 2\)\n$/);
  });
});

describe('doctor: schema against the migrations', () => {
  let expected: ExpectedTable[];
  beforeAll(async () => {
    expected = await expectedSchema();
  });

  it('reads the expected tables and indexes from the migrations themselves', () => {
    const outbox = expected.find((t) => t.name === 'outbox_event')!;
    expect(outbox.primaryKey).toEqual(['event_id']);
    expect(outbox.indexes).toContainEqual({
      name: 'idx_outbox_status_next',
      columns: ['status', 'next_attempt_at', 'event_id'],
      unique: false,
    });
    expect(outbox.indexes).toContainEqual(
      expect.objectContaining({ name: 'uq_outbox_aggregate_version', unique: true }),
    );
    // The retention migration adds an index to tx_record after the table is created.
    expect(expected.find((t) => t.name === 'tx_record')!.indexes.map((i) => i.name)).toEqual([
      'idx_tx_record_status_confirmed',
      'idx_tx_record_created',
    ]);
    expect(expected.map((t) => t.name).sort()).toEqual([
      'aggregate_cursor',
      'consumed_event',
      'outbox_event',
      'outbox_event_archive',
      'tx_record',
    ]);
  });

  it('passes a schema as the migrations create it', () => {
    const checks = compareSchema(expected, actualFrom(expected), everyone);
    expect(checks.map((c) => c.status)).toEqual(expected.map(() => 'pass'));
  });

  it('fails naming a missing table, a missing index, a changed index and a missing column, with the fix', () => {
    const actual = actualFrom(expected);
    actual.tables = actual.tables.filter((t) => t.t !== 'consumed_event');
    actual.indexes = actual.indexes.filter((i) => i.i !== 'idx_outbox_status_next');
    actual.indexes = actual.indexes.filter(
      (i) => !(i.i === 'idx_tx_record_status_confirmed' && i.c === 'created_at'),
    );
    actual.columns = actual.columns.filter((c) => !(c.t === 'aggregate_cursor' && c.c === 'last_version'));
    const checks = compareSchema(expected, actual, everyone);
    expect(byId(checks, 'schema.consumed_event')).toMatchObject({ status: 'fail', value: 'missing table' });
    expect(byId(checks, 'schema.consumed_event').advice).toMatch(/run the migrations \(rocketMqTxMigrations/);
    expect(byId(checks, 'schema.outbox_event')).toMatchObject({
      status: 'fail',
      value: 'missing index idx_outbox_status_next (status, next_attempt_at, event_id)',
    });
    expect(byId(checks, 'schema.tx_record').value).toBe(
      'index idx_tx_record_status_confirmed is (status, confirmed_at) (expected (status, confirmed_at, created_at))',
    );
    expect(byId(checks, 'schema.aggregate_cursor').value).toBe('missing column last_version');
  });

  it('fails a non-InnoDB table and a UNIQUE index that is not unique', () => {
    const actual = actualFrom(expected);
    actual.tables = actual.tables.map((t) => (t.t === 'tx_record' ? { ...t, engine: 'MyISAM' } : t));
    actual.indexes = actual.indexes.map((i) =>
      i.i === 'uq_outbox_aggregate_version' ? { ...i, nonUnique: 1 } : i,
    );
    const checks = compareSchema(expected, actual, everyone);
    expect(byId(checks, 'schema.tx_record').value).toMatch(/^engine MyISAM/);
    expect(byId(checks, 'schema.outbox_event').value).toBe(
      'index uq_outbox_aggregate_version is not UNIQUE (expected UNIQUE)',
    );
  });

  it('does not call a table the user cannot see "missing"; skips the optional archive', () => {
    const actual = actualFrom(expected);
    actual.tables = actual.tables.filter(
      (t) => !['consumed_event', 'outbox_event_archive', 'tx_record'].includes(t.t),
    );
    const checks = compareSchema(expected, actual, {
      visible: (t) => t !== 'consumed_event' && t !== 'tx_record',
      used: (t) => t !== 'consumed_event',
      optional: (t) => t === 'outbox_event_archive',
    });
    expect(byId(checks, 'schema.consumed_event').status).toBe('skip');
    expect(byId(checks, 'schema.tx_record')).toMatchObject({
      status: 'warn',
      value: expect.stringMatching(/not visible/),
    });
    expect(byId(checks, 'schema.outbox_event_archive')).toMatchObject({
      status: 'skip',
      value: 'absent (optional)',
    });
  });
});

describe('doctor: grants against rocketMqTxGrants', () => {
  const lines = [
    "GRANT USAGE ON *.* TO `rmqtx_relay`@`%` IDENTIFIED BY PASSWORD '*0123456789ABCDEF'",
    'GRANT SELECT, UPDATE ON `shop`.`outbox_event` TO `rmqtx_relay`@`%`',
    'GRANT SELECT (tx_id, status) ON `shop`.`tx_record` TO `rmqtx_relay`@`%`',
  ];

  it('parses SHOW GRANTS: table-level and wider privileges only, never the password hash', () => {
    const g = parseGrants([
      ...lines,
      'GRANT ALL PRIVILEGES ON `sh\\_%`.* TO `x`@`h` WITH GRANT OPTION',
      'GRANT EXECUTE ON PROCEDURE `shop`.`p` TO `x`@`h`',
      'GRANT `app_role` TO `x`@`h`',
    ]);
    expect(g).toEqual([
      { database: '*', table: '*', privileges: ['USAGE'] },
      { database: 'shop', table: 'outbox_event', privileges: ['SELECT', 'UPDATE'] },
      { database: 'sh\\_%', table: '*', privileges: ['ALL', 'GRANT OPTION'] },
    ]);
    expect(JSON.stringify(g)).not.toContain('0123456789ABCDEF');
    expect([...privilegesOn(g, 'sh_op', 'tx_record')]).toEqual(['ALL', 'GRANT OPTION']);
    expect([...privilegesOn(g, 'shXop', 'tx_record')]).toEqual([]);
    // The column-level SELECT does not count: the SDK's statements need the table-level one.
    expect([...privilegesOn(g, 'shop', 'tx_record')]).toEqual([]);
  });

  it('fails naming the missing privilege and table; passes what is granted', () => {
    const checks = compareGrants(parseGrants(lines), 'shop', ['relay'], {
      archive: false,
      account: "'rmqtx_relay'@'%'",
    });
    expect(byId(checks, 'grants.outbox_event')).toMatchObject({ status: 'pass' });
    const tx = byId(checks, 'grants.tx_record');
    expect(tx.status).toBe('fail');
    expect(tx.value).toBe("'rmqtx_relay'@'%' (relay) lacks SELECT on tx_record (has none)");
    expect(tx.advice).toMatch(/^GRANT SELECT ON `shop`.`tx_record` TO 'rmqtx_relay'@'%'/);
  });

  it('warns when a runtime user can drop or alter the SDK tables; not for the migrations user', () => {
    const g = parseGrants(['GRANT SELECT, INSERT, UPDATE, DROP, ALTER ON `shop`.* TO `p`@`%`']);
    const checks = compareGrants(g, 'shop', ['producer'], { archive: false, account: "'p'@'%'" });
    expect(checks.map((c) => [c.id, c.status])).toEqual([
      ['grants.tx_record', 'warn'],
      ['grants.outbox_event', 'warn'],
    ]);
    expect(checks[0]!.value).toMatch(/has DROP, ALTER on tx_record/);
    const root = compareGrants(
      parseGrants(['GRANT ALL PRIVILEGES ON *.* TO `root`@`%`']),
      'shop',
      ['migrations'],
      {
        archive: true,
        account: "'root'@'%'",
      },
    );
    expect(root.every((c) => c.status === 'pass')).toBe(true);
  });
});

describe('doctor: database thresholds', () => {
  it('isolation: REPEATABLE-READ and READ-COMMITTED pass, SERIALIZABLE warns, READ-UNCOMMITTED fails', () => {
    const iso = (level: string) => isolationCheck(level).status;
    expect([
      iso('REPEATABLE-READ'),
      iso('READ-COMMITTED'),
      iso('SERIALIZABLE'),
      iso('READ-UNCOMMITTED'),
    ]).toEqual(['pass', 'pass', 'warn', 'fail']);
  });

  it('PostgreSQL isolation: READ COMMITTED passes (READ UNCOMMITTED runs as it), REPEATABLE READ and SERIALIZABLE warn', () => {
    const iso = (level: string) => isolationCheck(level, 'postgres').status;
    expect([
      iso('read committed'),
      iso('read uncommitted'),
      iso('repeatable read'),
      iso('serializable'),
    ]).toEqual(['pass', 'pass', 'warn', 'warn']);
  });

  it('PostgreSQL lock_timeout: warns when it is 0 (no bound) or reaches the broker check horizon', () => {
    const o = opts({ brokerCheckIntervalMs: 2000, brokerCheckMax: 5, brokerTxTimeoutMs: 1000 }); // horizon 11 s
    expect(pgLockTimeoutCheck(10_999, o).status).toBe('pass');
    expect(pgLockTimeoutCheck(11_000, o).status).toBe('warn');
    expect(pgLockTimeoutCheck(null, o)).toMatchObject({
      status: 'warn',
      value: expect.stringMatching(/^lock_timeout 0 \(no bound\)/),
    });
  });

  it('lock wait: warns when innodb_lock_wait_timeout reaches the broker check horizon', () => {
    const o = opts({ brokerCheckIntervalMs: 2000, brokerCheckMax: 5, brokerTxTimeoutMs: 1000 }); // horizon 11 s
    expect(lockWaitCheck(10, o).status).toBe('pass');
    const warn = lockWaitCheck(11, o);
    expect(warn).toMatchObject({
      status: 'warn',
      threshold: '< broker check horizon 11 s (1000 ms + 5 x 2000 ms)',
    });
  });

  it('outbox: backlog warns above --max-backlog, DEAD fails above --max-dead, an old undelivered event fails', () => {
    const s = status([
      { k: 'count', topic: 'a', status: 'NEW', n: 10 },
      { k: 'count', topic: 'b', status: 'DEAD', n: 1 },
      { k: 'pending', topic: 'a', status: 'NEW', n: 10, age_us: 31 * MIN * 1000 },
    ]);
    const at = outboxChecks(s, opts({ thresholds: { maxBacklog: 10, maxDead: 1 } }));
    expect(at.map((c) => c.status)).toEqual(['pass', 'fail', 'pass']);
    const over = outboxChecks(s, opts({ thresholds: { maxBacklog: 9 } }));
    expect(byId(over, 'outbox.backlog')).toMatchObject({ status: 'warn', value: '10 NEW rows (most: a)' });
    expect(byId(over, 'outbox.dead')).toMatchObject({
      status: 'fail',
      value: '1 DEAD row (most: b)',
      threshold: '<= 0',
    });
    // Default: discard horizon (20 min) + 10 min.
    expect(byId(over, 'outbox.oldest-undelivered')).toMatchObject({ status: 'fail', threshold: '<= 30 min' });
    const empty = outboxChecks(status([]), opts());
    expect(empty.map((c) => c.status)).toEqual(['pass', 'pass', 'pass']);
  });

  it('in-doubt: fails overdue events, warns past the broker horizon or while republishing', () => {
    const o = opts(); // broker horizon 7.6 min, discard horizon 20 min
    const inDoubt = (state: string, ageMin: number) =>
      inDoubtCheck(
        status([
          { k: 'in_doubt', topic: null, status: null, n: 2, txs: 1, age_us: ageMin * MIN * 1000 },
          { k: 'in_doubt_state', topic: null, status: state, n: 2, txs: 1, age_us: ageMin * MIN * 1000 },
        ]),
        o,
      );
    expect(inDoubt('awaiting_broker', 1).status).toBe('pass');
    expect(inDoubt('awaiting_broker', 8)).toMatchObject({
      status: 'warn',
      value: '1 transaction, oldest 8 min; events awaiting the broker 2, overdue 0, republishing 0',
    });
    expect(inDoubt('republishing', 21).status).toBe('warn');
    const overdue = inDoubt('overdue', 21);
    expect(overdue).toMatchObject({ status: 'fail', value: expect.stringMatching(/overdue 2,/) });
    expect(overdue.advice).toMatch(/discardRecovery/);
    expect(inDoubtCheck(status([{ k: 'in_doubt', topic: null, status: null, n: 0, txs: 0 }]), o).value).toBe(
      'none',
    );
  });

  it('retention: skipped without --retention; warns when the oldest SENT row is past retention + grace', () => {
    expect(retentionCheck(5 * 86_400_000, opts()).status).toBe('skip');
    const o = opts({ thresholds: { retentionMs: 7 * 86_400_000 } });
    expect(retentionCheck(8 * 86_400_000, o).status).toBe('pass');
    expect(retentionCheck(8 * 86_400_000 + 1, o)).toMatchObject({
      status: 'warn',
      threshold: '<= 8 d (retention 7 d + grace 1 d)',
    });
    expect(retentionCheck(null, o)).toMatchObject({ status: 'pass', value: 'no SENT rows' });
  });

  it('clock skew: warn > 1 s, fail > 30 s, less half the round trip', () => {
    expect(clockCheck({ skewMs: 900, rttMs: 2 }).status).toBe('pass');
    expect(clockCheck({ skewMs: -1500, rttMs: 2 })).toMatchObject({
      status: 'warn',
      value: '1.5 s database behind (± 1 ms)',
    });
    expect(clockCheck({ skewMs: 1500, rttMs: 1200 }).status).toBe('pass');
    expect(clockCheck({ skewMs: 31_000, rttMs: 2 }).status).toBe('fail');
  });
});

describe('doctor: database measurements (fake DataSource)', () => {
  const fake = (query: (sql: string) => unknown, type = 'mysql') =>
    ({ options: { type }, query: async (sql: string) => query(sql) }) as unknown as DataSource;

  it('measures the skew at the middle of the round trip, on epoch seconds (no time zone involved)', async () => {
    let now = 1_000_000;
    const ds = fake(() => {
      now += 40; // a 40 ms round trip; the database read its clock at the middle, 5 s ahead
      return [{ t: String((1_000_000 + 20 + 5000) / 1000) }];
    });
    expect(await readClock(ds, () => now)).toEqual({ skewMs: 5000, rttMs: 40 });
  });

  it('reads the isolation level under both spellings (MySQL 8 removed tx_isolation; MariaDB 10 lacks transaction_isolation)', async () => {
    const mariadb10 = fake((sql) => {
      if (sql.includes('transaction_isolation'))
        throw new Error("ER_UNKNOWN_SYSTEM_VARIABLE: Unknown system variable 'transaction_isolation'");
      return [{ v: 'REPEATABLE-READ' }];
    });
    expect(await readIsolation(mariadb10)).toBe('REPEATABLE-READ');
    const mysql8 = fake((sql) => {
      if (sql.includes('tx_isolation') && !sql.includes('transaction_isolation')) throw new Error('unknown');
      return [{ v: 'READ-COMMITTED' }];
    });
    expect(await readIsolation(mysql8)).toBe('READ-COMMITTED');
  });

  it('on PostgreSQL reads the clock with EXTRACT(EPOCH ...) and the isolation from default_transaction_isolation', async () => {
    const seen: string[] = [];
    let now = 1_000_000;
    const pg = fake((sql) => {
      seen.push(sql);
      now += 40;
      if (sql.includes('EPOCH')) return [{ t: String((1_000_000 + 20 - 3000) / 1000) }];
      return [{ v: 'read committed' }];
    }, 'postgres');
    expect(await readClock(pg, () => now)).toEqual({ skewMs: -3000, rttMs: 40 });
    expect(await readIsolation(pg)).toBe('read committed');
    expect(seen.join('\n')).not.toMatch(/UNIX_TIMESTAMP|@@|TIMESTAMPDIFF/);
  });
});

describe('doctor: broker and option checks', () => {
  const o = opts({ transactionTopics: ['tx'], outboxTopics: ['n', 'gone', 'x'], fifoTopics: ['f'] });
  const intended = intendedTypes(o);

  it('checks each topic exists with the message type its delivery needs', () => {
    const routes: TopicRoute[] = [
      {
        topic: 'tx',
        state: 'found',
        queues: 8,
        messageTypes: ['TRANSACTION'],
        writable: true,
        brokers: ['b'],
      },
      {
        topic: 'n',
        state: 'found',
        queues: 8,
        messageTypes: ['TRANSACTION'],
        writable: true,
        brokers: ['b'],
      },
      { topic: 'gone', state: 'not-found', detail: 'No topic route info' },
      { topic: 'x', state: 'found', queues: 8, messageTypes: [], writable: true, brokers: ['b'] },
      { topic: 'f', state: 'found', queues: 8, messageTypes: ['FIFO'], writable: false, brokers: ['b'] },
    ];
    const checks = brokerChecks('127.0.0.1:8081', { routes }, intended);
    expect(checks.map((c) => [c.id, c.status])).toEqual([
      ['broker.connection', 'pass'],
      ['broker.topic.tx', 'pass'],
      ['broker.topic.n', 'fail'],
      ['broker.topic.gone', 'fail'],
      ['broker.topic.x', 'warn'],
      ['broker.topic.f', 'fail'],
    ]);
    expect(byId(checks, 'broker.topic.n').threshold).toBe('exists, message type NORMAL, writable');
    expect(byId(checks, 'broker.topic.gone').advice).toMatch(/\+message\.type=NORMAL/);
    expect(byId(checks, 'broker.topic.x').value).toMatch(/^could not read the message type/);
  });

  it("warns about confirmBy 'endTransaction' when a transactional topic is served by several brokers (a Cluster-mode proxy)", () => {
    const routes = (brokers: string[]): TopicRoute[] => [
      { topic: 'tx', state: 'found', queues: 8, messageTypes: ['TRANSACTION'], writable: true, brokers },
      {
        topic: 'n',
        state: 'found',
        queues: 8,
        messageTypes: ['NORMAL'],
        writable: true,
        brokers: ['a', 'b'],
      },
    ];
    const one = brokerChecks('h:1', { routes: routes(['a']) }, intended);
    expect(one.some((c) => c.id === 'broker.confirmBy')).toBe(false);
    const cluster = brokerChecks('h:1', { routes: routes(['broker-a', 'broker-b']) }, intended);
    expect(byId(cluster, 'broker.confirmBy')).toMatchObject({
      status: 'warn',
      value: 'transactional topics on several brokers: tx (broker-a, broker-b); confirmBy endTransaction',
    });
    expect(byId(cluster, 'broker.confirmBy').advice).toMatch(/confirmBy: 'delivery'/);
    const confirmed = brokerChecks('h:1', { routes: routes(['broker-a', 'broker-b']) }, intended, 'delivery');
    expect(byId(confirmed, 'broker.confirmBy').status).toBe('pass');
    expect(() => opts({ confirmBy: 'proxy' as never })).toThrow(/confirmBy/);
    expect(opts().confirmBy).toBe('endTransaction');
  });

  it('reports a refused login, a failed TLS handshake and a denied topic with the typed code, never the secret', () => {
    const secret = 'S3cr3t-never-printed';
    const auth = new AuthenticationError(
      'RocketMQ proxy at h:1 rejected the credentials (access key "ak")',
      new Error(secret),
    );
    const a = brokerChecks('h:1', { error: auth }, intended);
    expect(a[0]).toMatchObject({ id: 'broker.connection', status: 'fail' });
    expect(a[0]!.value).toMatch(/^AUTHENTICATION_FAILED: /);
    expect(a.slice(1).every((c) => c.status === 'skip')).toBe(true);
    expect(JSON.stringify(a)).not.toContain(secret);
    expect(brokerChecks('h:1', { error: new TlsError('handshake failed') }, intended)[0]!.value).toMatch(
      /^TLS_FAILED: /,
    );
    const denied = brokerChecks(
      'h:1',
      {
        routes: [
          { topic: 'tx', state: 'denied', error: new AuthorizationError('Topic:tx', 'denied Topic:tx') },
        ],
      },
      intended,
    );
    expect(byId(denied, 'broker.topic.tx').value).toMatch(/^AUTHORIZATION_DENIED: /);
  });

  it('discard horizon: fail at or under the broker horizon, warn within two check intervals of it', () => {
    const at = (discardHorizonMs: number) =>
      byId(optionChecks(opts({ discardHorizonMs })), 'options.discard-horizon').status;
    // RocketMQ defaults: 6 s + 15 x 30 s = 456 s.
    expect([at(456_000), at(456_001), at(516_000), at(516_001)]).toEqual(['fail', 'warn', 'warn', 'pass']);
  });

  it('lock wait vs check interval: whole seconds; fail at the interval, warn above half of it', () => {
    const at = (lockWaitTimeoutMs: number) =>
      byId(optionChecks(opts({ lockWaitTimeoutMs, brokerCheckIntervalMs: 4000 })), 'options.lock-wait')
        .status;
    expect([at(2000), at(2001), at(4000)]).toEqual(['pass', 'warn', 'fail']);
  });

  it('delivery: a topic cannot be both transactional and FIFO; no topics is a skip', () => {
    expect(
      byId(optionChecks(opts({ transactionTopics: ['t'], fifoTopics: ['t'] })), 'options.delivery').status,
    ).toBe('fail');
    expect(byId(optionChecks(opts()), 'options.delivery').status).toBe('skip');
    expect(byId(optionChecks(opts({ outboxFallback: true })), 'options.outbox-fallback').value).toBe('on');
  });
});

describe('doctor: options and the command line', () => {
  it('validates every option with InvalidOptionError naming it', () => {
    const bad: Array<[unknown, string]> = [
      [{ lockWaitTimeoutMs: 0 }, 'lockWaitTimeoutMs'],
      [{ components: ['root'] }, 'components[0]'],
      [{ transactionTopics: ['a b'] }, 'transactionTopics[0]'],
      [{ thresholds: { maxDead: -1 } }, 'thresholds.maxDead'],
      [{ thresholds: { maxAge: 1 } }, 'thresholds.maxAge'],
      [{ broker: { endpoints: 'not an endpoint' } }, 'broker.endpoints'],
      [{ broker: { endpoints: 'h:1', nameServer: 'h:99999' } }, 'broker.nameServer'],
      [
        { broker: { endpoints: 'h:1', credentials: { accessKey: 'a', accessSecret: '' } } },
        'credentials.accessSecret',
      ],
      [{ dataSource: {} }, 'dataSource'],
      [{ onProgress: 'yes' }, 'onProgress'],
      [{ brokerCheckMax: 0 }, 'brokerCheckMax'],
    ];
    for (const [value, option] of bad) {
      let err: unknown;
      try {
        resolveDoctorOptions(value);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(InvalidOptionError);
      expect((err as InvalidOptionError).option).toBe(option);
    }
  });

  it('runDoctor without a database or broker reports skips and the option checks', async () => {
    const r: DoctorReport = await runDoctor({ transactionTopics: ['t'] });
    expect(r.status).toBe('pass');
    expect(byId(r.checks, 'db.connection').status).toBe('skip');
    expect(byId(r.checks, 'broker.connection').status).toBe('skip');
    expect(Object.keys(r).sort()).toEqual(['checks', 'counts', 'exitCode', 'generatedAt', 'status']);
  });

  it('rejects bad flags with exit 2 naming the flag', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--max-dead=-1'], /invalid --max-dead "-1": expected an integer from 0 to/],
      [['--lock-wait', '5'], /invalid --lock-wait "5": expected a duration/],
      [
        ['--component', 'producer,root'],
        /invalid --component "producer,root": expected comma-separated components/,
      ],
      [['--broker-check-max', '0'], /invalid --broker-check-max "0": expected an integer from 1 to 1000/],
      [['--transaction-topics', 'a b'], /invalid --transaction-topics "a b"/],
      [['--retention', '7'], /invalid --retention "7"/],
      [
        ['--ca-file', '/nonexistent/ca.pem', '--transaction-topics', 't'],
        /invalid --ca-file "\/nonexistent\/ca.pem": expected a readable PEM/,
      ],
      [['--migrations-table', 'a-b'], /invalid --migrations-table "a-b": expected a table name/],
      [['--confirm-by', 'proxy'], /invalid --confirm-by "proxy": expected "endTransaction" or "delivery"/],
      [['--bogus'], /unknown flag --bogus/],
    ];
    for (const [argv, message] of cases) {
      const r = await cli(['doctor', ...argv], { ROCKETMQ_TX_DB_URL: 'mysql://u@127.0.0.1:1/x' });
      expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      expect(r.stderr).toMatch(message);
      expect(r.stdout).toBe('');
    }
  });

  it('an unreachable database is a failed check (exit 2) with the password masked, in text and JSON', async () => {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    await new Promise<void>((r) => server.close(() => r()));
    const env = { ROCKETMQ_TX_DB_URL: `mysql://app:pa55-w0rd@127.0.0.1:${port}/shop` };
    const json = await cli(['doctor', '--json'], env);
    expect(json.code).toBe(2);
    const report = JSON.parse(json.stdout) as DoctorReport;
    expect(report).toMatchObject({ status: 'fail', exitCode: 2 });
    const conn = byId(report.checks, 'db.connection');
    expect(conn.status).toBe('fail');
    expect(conn.value).toContain(`mysql://app:***@127.0.0.1:${port}/shop`);
    expect(json.stderr).toMatch(/doctor: checking the database at mysql:\/\/app:\*\*\*@/);
    const text = await cli(['doctor'], env);
    expect(text.code).toBe(2);
    expect(text.stdout).toMatch(/FAIL +db\.connection/);
    for (const out of [json.stdout, json.stderr, text.stdout, text.stderr])
      expect(out).not.toContain('pa55-w0rd');
  });

  it("lock wait vs the broker's transactionTimeOut: fail when the fence waits longer than the broker before its first check", () => {
    const at = (lockWaitTimeoutMs: number) =>
      byId(
        optionChecks(opts({ lockWaitTimeoutMs, brokerTxTimeoutMs: 1000, brokerCheckIntervalMs: 10_000 })),
        'options.lock-wait',
      );
    expect(at(1000).status).toBe('pass');
    expect(at(2000)).toMatchObject({ status: 'fail' });
    expect(at(2000).advice).toMatch(/transactionTimeOut/);
  });

  it('producer topics: every transactional topic declared, else fail naming the missing; skip when not given', () => {
    const c = (producerTopics?: string[]) =>
      byId(
        codeChecks(opts({ transactionTopics: ['a', 'b'], ...(producerTopics ? { producerTopics } : {}) })),
        'options.producer-topics',
      );
    expect(c().status).toBe('skip');
    expect(c(['a', 'b', 'x']).status).toBe('pass');
    expect(c(['a'])).toMatchObject({ status: 'fail', value: 'declared: a; missing b' });
  });

  it('handlers: every carried type and version reaches a handler directly or through upcasters', () => {
    const handle = async () => undefined;
    const consumer = (unknownEventTypes?: 'retry' | 'ignore') => ({
      consumerGroup: 'g',
      subscriptions: ['t'],
      handlers: [{ eventType: 'Placed', eventVersion: 2, handle }],
      upcasters: [{ eventType: 'Placed', fromVersion: 1, upcast: (d: unknown) => d }],
      ...(unknownEventTypes ? { unknownEventTypes } : {}),
    });
    const check = (events: Array<{ eventType: string; eventVersion: number }>, u?: 'retry' | 'ignore') =>
      byId(codeChecks(opts({ consumers: [consumer(u)], topicEvents: { t: events } })), 'options.handlers.g');
    const v1 = { eventType: 'Placed', eventVersion: 1 };
    const v2 = { eventType: 'Placed', eventVersion: 2 };
    expect(check([v1, v2])).toMatchObject({
      status: 'pass',
      value: 'handled: Placed v1 -> v2 (1 upcaster(s)), Placed v2',
    });
    const v3 = check([{ eventType: 'Placed', eventVersion: 3 }]);
    expect(v3.status).toBe('fail');
    expect(v3.value).toMatch(/no handler for the version: Placed v3 on t \(handlers for v2/);
    const other = { eventType: 'Paid', eventVersion: 1 };
    expect(check([v2, other]).status).toBe('fail');
    expect(check([v2, other], 'ignore').status).toBe('warn');
    expect(byId(codeChecks(opts({ consumers: [consumer()] })), 'options.handlers.g').status).toBe('skip');
    // on(definition, fn) handlers fit as they are.
    const h = on({ eventType: 'Placed', eventVersion: 2 } as never, handle);
    expect(() =>
      opts({ consumers: [{ consumerGroup: 'g', subscriptions: ['t'], handlers: [h] }] }),
    ).not.toThrow();
    expect(() => opts({ consumers: [{ consumerGroup: 'g', subscriptions: [], handlers: [h] }] })).toThrow(
      /consumers\[0\]\.subscriptions/,
    );
  });

  it('broker settings: a deep DLQ or zero retries warns, differing masters warn, an unreachable NameServer fails', () => {
    const o = opts({ broker: { endpoints: '127.0.0.1:8081', nameServer: '127.0.0.1:9876' } });
    const master = { name: 'b', addr: 'x:10911', txTimeoutMs: 6000, checkIntervalMs: 30_000, checkMax: 15 };
    const facts = {
      masters: [master, { ...master, name: 'c', checkMax: 5 }],
      groups: [
        { group: 'ok', retryMaxTimes: 16, dlqDepth: 0 },
        { group: 'deep', retryMaxTimes: 16, dlqDepth: 3 },
        { group: 'zero', retryMaxTimes: 0, dlqDepth: 0 },
      ],
      producers: [{ topic: 'tx', connections: 0 }],
    };
    const checks = adminChecks(o, { facts });
    expect(checks.map((c) => [c.id, c.status])).toEqual([
      ['broker.settings', 'warn'],
      ['broker.group.ok', 'pass'],
      ['broker.group.deep', 'warn'],
      ['broker.group.zero', 'warn'],
      ['broker.producers.tx', 'skip'],
    ]);
    expect(byId(checks, 'broker.group.deep').value).toBe('retryMaxTimes 16; DLQ %DLQ%deep: 3 messages');
    expect(adminChecks(o, { error: new Error('no answer') })[0]).toMatchObject({
      id: 'broker.settings',
      status: 'fail',
    });
    expect(adminChecks(opts(), undefined)[0]).toMatchObject({ id: 'broker.settings', status: 'skip' });
  });

  it('a NameServer that accepts and never answers is reported within the request timeout; the secret is never printed', async () => {
    const sockets = new Set<net.Socket>();
    const server = net.createServer((s) => sockets.add(s));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    try {
      await expect(readMasters({ nameServer: `127.0.0.1:${port}`, timeoutMs: 200 })).rejects.toThrow(
        `no answer from 127.0.0.1:${port} within 200 ms`,
      );
      const secret = 'doctor-secret-value-42';
      const report = await runDoctor({
        broker: {
          endpoints: `127.0.0.1:${port}`,
          nameServer: `127.0.0.1:${port}`,
          credentials: { accessKey: 'ak', accessSecret: secret },
          requestTimeoutMs: 200,
        },
      });
      expect(byId(report.checks, 'broker.settings')).toMatchObject({ status: 'fail' });
      expect(JSON.stringify(report)).not.toContain(secret);
      expect(renderDoctor(report)).not.toContain(secret);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
