import {
  dateFlag,
  durationFlag,
  FlagBindings,
  helpText,
  intFlag,
  parseDuration,
  parseFlags,
  topicsFlag,
  UsageError,
  type FlagSpecs,
} from '../../src/cli/args';
import { databaseError, resolveBrokerTarget, resolveDbTarget } from '../../src/cli/connection';
import { toStoreError } from '../../src/store/typeorm/storeError';
import { describeError, formatAge, maskSecrets, renderTable, stderrLogger } from '../../src/cli/output';
import { planRelay } from '../../src/cli/relay';
import { InvalidOptionError, StoreError } from '../../src/errors';
import { OutboxRelay } from '../../src/relay/OutboxRelay';
import { Journal, fakeDataSource } from './fakes/fakes';

const specs: FlagSpecs = {
  'batch-size': { type: 'string', value: '<n>', description: 'rows' },
  json: { type: 'boolean', description: 'json' },
  topic: { type: 'string', multiple: true, value: '<t>', description: 'topics' },
};

function usageMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error('expected a UsageError');
}

describe('CLI flag parsing', () => {
  it('parses string, boolean and repeated flags', () => {
    const p = parseFlags(specs, ['--batch-size', '7', '--json', '--topic', 'a', '--topic=b,c']);
    expect(p.flags).toEqual({ 'batch-size': '7', json: true, topic: ['a', 'b,c'] });
    expect(topicsFlag(p.flags, 'topic')).toEqual(['a', 'b', 'c']);
  });

  it('names an unknown flag and lists the allowed ones', () => {
    const m = usageMessage(() => parseFlags(specs, ['--batchsize', '7']));
    expect(m).toBe('unknown flag --batchsize (allowed: --batch-size, --json, --topic)');
  });

  it('names a flag whose value is missing, or followed by another flag', () => {
    expect(usageMessage(() => parseFlags(specs, ['--batch-size']))).toBe('--batch-size needs a value <n>');
    expect(usageMessage(() => parseFlags(specs, ['--batch-size', '--json']))).toMatch(
      /^--batch-size needs a value <n> \(got the next flag instead/,
    );
  });

  it('refuses a value on a switch and stray positionals', () => {
    expect(usageMessage(() => parseFlags(specs, ['--json=yes']))).toBe(
      '--json takes no value (it is a switch)',
    );
    expect(usageMessage(() => parseFlags(specs, ['extra']))).toBe(
      'unexpected argument "extra" (this command takes flags only)',
    );
    expect(parseFlags(specs, ['list'], 1).positionals).toEqual(['list']);
    expect(usageMessage(() => parseFlags(specs, ['list', 'more'], 1))).toBe('unexpected argument "more"');
  });

  it('checks integers, durations, topic names and dates, naming flag, value and rule', () => {
    const flags = parseFlags(specs, ['--batch-size', '12x']).flags;
    expect(usageMessage(() => intFlag(flags, 'batch-size'))).toBe(
      'invalid --batch-size "12x": expected an integer',
    );
    expect(usageMessage(() => intFlag({ n: '0' }, 'n', { min: 1, max: 9 }))).toBe(
      'invalid --n "0": expected an integer from 1 to 9',
    );
    expect(intFlag({ n: '9' }, 'n', { min: 1, max: 9 })).toBe(9);
    expect(usageMessage(() => durationFlag({ d: '10' }, 'd', { minMs: 0, maxMs: 1e9 }))).toBe(
      'invalid --d "10": expected a duration such as 500ms, 30s, 5m, 2h, 7d or 1h30m',
    );
    expect(usageMessage(() => durationFlag({ d: '2d' }, 'd', { minMs: 1000, maxMs: 86_400_000 }))).toBe(
      'invalid --d "2d": expected a duration from 1s to 1d',
    );
    expect(usageMessage(() => topicsFlag({ topic: ['ok,bad topic'] }, 'topic'))).toMatch(
      /^invalid --topic "ok,bad topic": expected comma-separated topic names/,
    );
    expect(usageMessage(() => dateFlag({ since: '31/01/2026' }, 'since'))).toMatch(
      /^invalid --since "31\/01\/2026": expected an ISO-8601 date/,
    );
    expect(dateFlag({ since: '2026-01-31T12:00:00Z' }, 'since')?.toISOString()).toBe(
      '2026-01-31T12:00:00.000Z',
    );
  });

  it('reads durations with units and sequences', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('7d')).toBe(7 * 86_400_000);
    expect(parseDuration('1.5s')).toBe(1500);
    for (const bad of ['', '10', 's', '5 m', '-1s', '1y', '1h30']) expect(parseDuration(bad)).toBeUndefined();
  });

  it('generates help from the flag specs', () => {
    const text = helpText('rocketmq-tx x [flags]', 'Does x.', specs);
    expect(text).toContain('Usage: rocketmq-tx x [flags]');
    expect(text).toMatch(/--batch-size <n>\s+rows/);
    expect(text).toMatch(/--topic <t>\s+topics \(repeatable\)/);
  });

  it('maps a library InvalidOptionError back to the flag it came from', () => {
    const b = new FlagBindings();
    b.bind('leaseMs', 'lease', '100ms', 'duration');
    b.bind('transactionTopics', 'transaction-topics', 'x');
    const lease = b.translate(
      new InvalidOptionError('leaseMs', 100, 'an integer from 1000 to 3600000', {
        min: 1000,
        max: 3_600_000,
      }),
    );
    expect(lease?.message).toBe('invalid --lease "100ms": expected a duration from 1s to 1h');
    const topic = b.translate(new InvalidOptionError('transactionTopics[0]', 'x', 'one of options.topics'));
    expect(topic?.message).toBe('invalid --transaction-topics "x": expected one of options.topics');
    expect(b.translate(new InvalidOptionError('batchSize', 0, 'an integer'))).toBeUndefined();
  });

  it('takes the rule from the error, not from its message (a value may contain "; expected")', () => {
    const b = new FlagBindings();
    b.bind('transactionTopics', 'transaction-topics', 'x; expected y');
    const err = new InvalidOptionError('transactionTopics[0]', 'x; expected y', 'one of options.topics');
    expect(err).toMatchObject({
      option: 'transactionTopics[0]',
      value: 'x; expected y',
      allowed: 'one of options.topics',
      expected: 'one of options.topics',
    });
    expect(b.translate(err)?.message).toBe(
      'invalid --transaction-topics "x; expected y": expected one of options.topics',
    );
  });
});

describe('CLI connection settings', () => {
  it('takes the default URL, then ROCKETMQ_TX_DB_URL, then --db-url', () => {
    expect(resolveDbTarget({}, {})).toMatchObject({
      type: 'mysql',
      host: '127.0.0.1',
      port: 3306,
      username: 'root',
      database: 'test',
      display: 'mysql://root@127.0.0.1:3306/test',
    });
    const env = { ROCKETMQ_TX_DB_URL: 'mariadb://app:s3cr%40t@db.example:3307/shop' };
    const fromEnv = resolveDbTarget({}, env);
    expect(fromEnv).toMatchObject({ type: 'mariadb', host: 'db.example', port: 3307, password: 's3cr@t' });
    expect(fromEnv.display).toBe('mariadb://app:***@db.example:3307/shop');
    expect(resolveDbTarget({ 'db-url': 'mysql://u@h/d' }, env)).toMatchObject({ host: 'h', database: 'd' });
  });

  it('takes the password from ROCKETMQ_TX_DB_PASSWORD and never shows it', () => {
    const t = resolveDbTarget({ 'db-url': 'mysql://app@h:3306/d' }, { ROCKETMQ_TX_DB_PASSWORD: 'p@ss:w/rd' });
    expect(t.password).toBe('p@ss:w/rd');
    expect(t.display).toBe('mysql://app:***@h:3306/d');
    expect(JSON.stringify(t.display)).not.toContain('p@ss');
  });

  it('refuses a password on the command line, masked in the message', () => {
    const m = usageMessage(() => resolveDbTarget({ 'db-url': 'mysql://root:hunter2@h/d' }, {}));
    expect(m).toMatch(/^--db-url "mysql:\/\/root:\*\*\*@h\/d" carries a password/);
    expect(m).not.toContain('hunter2');
  });

  it('takes postgres:// and postgresql:// URLs (PostgreSQL driver, port 5432), the password masked', () => {
    expect(resolveDbTarget({ 'db-url': 'postgres://app@pg.example/shop' }, {})).toMatchObject({
      type: 'postgres',
      host: 'pg.example',
      port: 5432,
      username: 'app',
      database: 'shop',
      display: 'postgres://app@pg.example/shop',
    });
    const env = { ROCKETMQ_TX_DB_URL: 'postgresql://app:s3cr%40t@pg.example:6432/shop' };
    const t = resolveDbTarget({}, env);
    expect(t).toMatchObject({ type: 'postgres', port: 6432, password: 's3cr@t', database: 'shop' });
    expect(t.display).toBe('postgresql://app:***@pg.example:6432/shop');
    expect(JSON.stringify(t.display)).not.toContain('s3cr');
    const m = usageMessage(() => resolveDbTarget({ 'db-url': 'postgres://root:hunter2@h/d' }, {}));
    expect(m).toMatch(/^--db-url "postgres:\/\/root:\*\*\*@h\/d" carries a password/);
    expect(m).not.toContain('hunter2');
    const noDb = usageMessage(() => resolveDbTarget({}, { ROCKETMQ_TX_DB_URL: 'postgresql://u:pw@h' }));
    expect(noDb).toMatch(
      /^invalid ROCKETMQ_TX_DB_URL "postgresql:\/\/u:\*\*\*@h": expected a URL that names/,
    );
    expect(noDb).not.toContain('pw');
  });

  it('names the source of a bad URL and what is allowed', () => {
    expect(usageMessage(() => resolveDbTarget({ 'db-url': 'oracle://u@h/d' }, {}))).toBe(
      'invalid --db-url "oracle://u@h/d": expected a mysql://, mariadb://, postgres:// or postgresql:// URL',
    );
    const secret = usageMessage(() => resolveDbTarget({}, { ROCKETMQ_TX_DB_URL: 'mssql://u:topsecret@h/d' }));
    expect(secret).toBe(
      'invalid ROCKETMQ_TX_DB_URL "mssql://u:***@h/d": expected a mysql://, mariadb://, postgres:// or postgresql:// URL',
    );
    expect(usageMessage(() => resolveDbTarget({}, { ROCKETMQ_TX_DB_URL: 'mysql://u:pw@h' }))).toBe(
      'invalid ROCKETMQ_TX_DB_URL "mysql://u:***@h": expected a URL that names the database: mysql://host/database',
    );
    expect(usageMessage(() => resolveDbTarget({ 'db-url': 'not a url' }, {}))).toMatch(
      /^invalid --db-url "not a url"/,
    );
  });

  it('checks endpoints and takes broker credentials from the environment only', () => {
    expect(resolveBrokerTarget({}, {})).toEqual({ endpoints: '127.0.0.1:8081', sslEnabled: false });
    expect(usageMessage(() => resolveBrokerTarget({ endpoints: 'h:1,h:2' }, {}))).toBe(
      'invalid --endpoints "h:1,h:2": expected "host:port" or "host1:port;host2:port"',
    );
    expect(usageMessage(() => resolveBrokerTarget({}, { ROCKETMQ_ENDPOINTS: 'x y' }))).toMatch(
      /^invalid ROCKETMQ_ENDPOINTS "x y"/,
    );
    expect(usageMessage(() => resolveBrokerTarget({}, { ROCKETMQ_ACCESS_KEY: 'ak' }))).toMatch(
      /^ROCKETMQ_ACCESS_SECRET is not set/,
    );
    const t = resolveBrokerTarget(
      { endpoints: 'a:1;b:2', ssl: true },
      { ROCKETMQ_ACCESS_KEY: 'ak', ROCKETMQ_ACCESS_SECRET: 'sk', ROCKETMQ_NAMESPACE: 'ns1' },
    );
    expect(t).toEqual({
      endpoints: 'a:1;b:2',
      namespace: 'ns1',
      sslEnabled: true,
      credentials: { accessKey: 'ak', accessSecret: 'sk' },
    });
  });
});

describe('CLI database errors', () => {
  it('a missing table privilege names the privilege and the table, also when wrapped in StoreAccessDeniedError', () => {
    const target = resolveDbTarget({}, {});
    const driver = Object.assign(new Error('denied'), {
      code: 'ER_TABLEACCESS_DENIED_ERROR',
      errno: 1142,
      sqlMessage: "SELECT command denied to user 'a'@'h' for table `db`.`consumed_event`",
    });
    for (const err of [driver, toStoreError('status: the consumed_event query failed', driver)]) {
      expect(databaseError(target, err).message).toMatch(
        /^the database user of mysql:\/\/root@127\.0\.0\.1:3306\/test lacks SELECT on consumed_event \(grants per command/,
      );
    }
  });
});

describe('CLI database errors on PostgreSQL', () => {
  const target = resolveDbTarget({ 'db-url': 'postgres://app@h/shop' }, {});
  const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });
  it.each([
    ['28P01', 'password authentication failed for user "app"', /refused the login/],
    [
      '3D000',
      'database "shop" does not exist',
      /^the database named in postgres:\/\/app@h\/shop does not exist/,
    ],
    ['42P01', 'relation "tx_record" does not exist', /run the SDK migrations/],
    ['42501', 'permission denied for table outbox_event', /lacks a privilege on outbox_event/],
    [
      'ECONNREFUSED',
      'connect ECONNREFUSED 127.0.0.1:5432',
      /^cannot reach the database at postgres:\/\/app@h\/shop/,
    ],
  ])('%s becomes one line naming the masked URL', (code, message, expected) => {
    expect(databaseError(target, pgError(code, message)).message).toMatch(expected);
  });
});

describe('relay flags', () => {
  it('become OutboxRelay options', () => {
    const flags = parseFlags(
      {
        topics: { type: 'string', multiple: true, description: '' },
        'transaction-topics': { type: 'string', multiple: true, description: '' },
        'batch-size': { type: 'string', description: '' },
        lease: { type: 'string', description: '' },
        'backoff-max': { type: 'string', description: '' },
        'no-discard-reconcile': { type: 'boolean', description: '' },
        'progress-interval': { type: 'string', description: '' },
      },
      [
        '--topics=a,b',
        '--transaction-topics',
        'b',
        '--batch-size',
        '50',
        '--lease',
        '1m',
        '--backoff-max',
        '10s',
        '--no-discard-reconcile',
        '--progress-interval',
        '0s',
      ],
    ).flags;
    const plan = planRelay(flags, { ROCKETMQ_ENDPOINTS: 'proxy:8081' });
    expect(plan.options).toEqual({
      endpoints: 'proxy:8081',
      topics: ['a', 'b'],
      transactionTopics: ['b'],
      fifoTopics: [],
      sslEnabled: false,
      batchSize: 50,
      leaseMs: 60_000,
      backoff: { maxDelayMs: 10_000 },
      reconcileDiscarded: false,
    });
    expect(plan.progressIntervalMs).toBe(0);
    expect(plan.poolSize).toBe(10);
  });

  it('--ca-file means TLS with that CA; a file the relay cannot read is reported as the flag', () => {
    const plan = planRelay({ topics: ['a'], 'ca-file': '/nonexistent/ca.pem' }, {});
    expect(plan.options.tls).toEqual({ caFile: '/nonexistent/ca.pem' });
    expect(plan.options.sslEnabled).toBeUndefined();
    let err: unknown;
    try {
      new OutboxRelay({ ...plan.options, dataSource: fakeDataSource(new Journal()) });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidOptionError);
    expect(plan.bindings.translate(err)?.message).toMatch(
      /^invalid --ca-file "\/nonexistent\/ca\.pem": expected a readable PEM certificate file \(ENOENT\)/,
    );
    expect(usageMessage(() => planRelay({ topics: ['a'], 'ca-file': ' ' }, {}))).toMatch(
      /^invalid --ca-file/,
    );
  });

  it('requires --topics and keeps the typed topics inside it', () => {
    expect(usageMessage(() => planRelay({}, {}))).toMatch(/^--topics is required/);
    expect(usageMessage(() => planRelay({ topics: ['a'], 'fifo-topics': ['z'] }, {}))).toBe(
      'invalid --fifo-topics "z": expected one of --topics (a)',
    );
    expect(
      usageMessage(() => planRelay({ topics: ['a'], 'fifo-topics': ['a'], 'transaction-topics': ['a'] }, {})),
    ).toMatch(/both TRANSACTION and FIFO/);
  });
});

describe('CLI output', () => {
  it('masks passwords in URLs wherever they appear', () => {
    expect(maskSecrets('connect mysql://root:pw@h:3306/db failed; mariadb://a:b%40c@x/y')).toBe(
      'connect mysql://root:***@h:3306/db failed; mariadb://a:***@x/y',
    );
    expect(maskSecrets('mysql://root@h/db')).toBe('mysql://root@h/db');
  });

  it('renders aligned tables and readable ages', () => {
    expect(
      renderTable(
        ['name', 'n'],
        [
          ['a', 1],
          ['bbb', 22],
        ],
      ),
    ).toBe('name   n\n----  --\na      1\nbbb   22\n');
    expect(formatAge(null)).toBe('-');
    expect(formatAge(850)).toBe('850 ms');
    expect(formatAge(12_345)).toBe('12.3 s');
    expect(formatAge(307_000)).toBe('5 m 07 s');
    expect(formatAge(2 * 86_400_000 + 4 * 3_600_000)).toBe('2 d 04 h');
  });

  it('describes an error and its causes on one line, masked', () => {
    const driver = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1\nmore'), {
      code: 'ECONNREFUSED',
    });
    const e = new StoreError('status: the tx_record query failed for mysql://u:pw@h/d', driver);
    expect(describeError(e)).toBe(
      'status: the tx_record query failed for mysql://u:***@h/d: connect ECONNREFUSED 127.0.0.1:1 more',
    );
  });

  it('logs warnings to stderr once per window, errors always, info only when verbose, URLs masked', () => {
    let err = '';
    const io = { stdout: { write: () => true }, stderr: { write: (t: string) => (err += t) }, env: {} };
    const log = stderrLogger(io, false, 60_000);
    for (let i = 0; i < 5; i++) log.warn({ errCode: 'ER_NO_SUCH_TABLE' }, 'outbox claim failed');
    log.error({ eventId: 'a' }, 'outbox event is DEAD');
    log.error({ eventId: 'b' }, 'outbox event is DEAD');
    log.info({}, 'relay started');
    log.warn({ component: 'rocketmq-client' }, 'route retry');
    log.warn({ url: 'mysql://u:pw@h/d' }, 'other');
    const lines = err.trimEnd().split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(/ warn outbox claim failed \{"errCode":"ER_NO_SUCH_TABLE"\}$/);
    expect(lines[1]).toMatch(/ error outbox event is DEAD \{"eventId":"a"\}$/);
    expect(lines[2]).toMatch(/ error outbox event is DEAD \{"eventId":"b"\}$/);
    expect(lines[3]).toMatch(/ warn other \{"url":"mysql:\/\/u:\*\*\*@h\/d"\}$/);
    err = '';
    const verbose = stderrLogger(io, true, 0);
    verbose.info({}, 'relay started');
    verbose.warn({ component: 'rocketmq-client' }, 'route retry');
    expect(err.trimEnd().split('\n')).toHaveLength(2);
  });
});
