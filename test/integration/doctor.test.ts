import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import * as net from 'node:net';
import { join, resolve } from 'node:path';
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import {
  rocketMqTxArchiveMigrations,
  rocketMqTxGrants,
  rocketMqTxMigrations,
  uuidv7,
  type DoctorCheck,
  type DoctorReport,
} from '../../src';
import { databaseOf } from '../helpers/db';
import { DB_URL, ENDPOINTS } from '../helpers/env';
import { buildCli } from '../helpers/buildCli';

// `rocketmq-tx doctor` as a child process (compiled once, as `npm run build` ships it) against
// the real database (MariaDB or PostgreSQL, from ROCKETMQ_TX_DB_URL) and broker: a healthy scratch database passes, then one thing at a time is
// broken and exactly the check for it fails (or warns), with the matching exit code.
const ROOT = resolve(__dirname, '..', '..');
const RUN = `${process.pid}`;
const SCRATCH = `rmqtx_scratch_doctor_${RUN}`;
const TX = 'rmqtx_tx_0';
const NORMAL = 'rmqtx_normal_0';
const FIFO = 'rmqtx_fifo_0';
const HOSTS = ['127.0.0.1', 'localhost'];
// PostgreSQL role names: lower case.
const PASSWORD = randomBytes(12).toString('hex');
const BUILD = join(ROOT, 'node_modules', '.cache', `rmqtx-doctor-test-${process.pid}`);
/** The deploy account's view: every table, DDL expected, TypeORM's bookkeeping table by its name here. */
const DEPLOY = ['--component', 'migrations', '--migrations-table', 'rocketmq_tx_migrations'];
const TOPIC_FLAGS = ['--transaction-topics', TX, '--outbox-topics', NORMAL, '--fifo-topics', FIFO];

const PG = databaseOf(DB_URL) === 'postgres';
/** The NameServer of the local broker (scripts/rocketmq.js: 9876 + ROCKETMQ_TX_PORT_OFFSET). */
const NAMESRV =
  process.env.ROCKETMQ_NAMESRV ?? `127.0.0.1:${9876 + Number(process.env.ROCKETMQ_TX_PORT_OFFSET || 0)}`;

/** The tests' own statements, per database. */
const D = PG
  ? {
      ago: (seconds: number) => `now() - interval '${seconds} seconds'`,
      q: (name: string) => `"${name}"`,
      p: (n: number) => `$${n}`,
      blob: `'\\x7b7d'::bytea`,
      dropIndex: 'DROP INDEX idx_outbox_status_next',
    }
  : {
      ago: (seconds: number) => `CURRENT_TIMESTAMP(3) - INTERVAL ${seconds} SECOND`,
      q: (name: string) => `\`${name}\``,
      p: () => '?',
      blob: "X'7B7D'",
      dropIndex: 'DROP INDEX idx_outbox_status_next ON outbox_event',
    };

/** Users of the scratch database, each with the grants of a case below. */
const USERS = {
  producer: `rmqtx_doc_p_${RUN}`.slice(0, 32),
  noUpdate: `rmqtx_doc_nu_${RUN}`.slice(0, 32),
  ddl: `rmqtx_doc_ddl_${RUN}`.slice(0, 32),
};

function scratchUrl(user?: string): string {
  const url = new URL(DB_URL);
  if (user !== undefined) {
    url.username = user;
    url.password = PASSWORD;
  }
  url.pathname = `/${SCRATCH}`;
  return url.toString();
}

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
  report: DoctorReport;
}

/** `rocketmq-tx doctor --json <args>` as `user` (root when undefined) on the scratch database. */
function doctor(args: string[], user?: string, env: Record<string, string> = {}): Promise<Result> {
  const child = spawn(process.execPath, [join(BUILD, 'cli', 'main.js'), 'doctor', '--json', ...args], {
    cwd: ROOT,
    env: { ...process.env, ROCKETMQ_TX_DB_URL: scratchUrl(user), ROCKETMQ_ENDPOINTS: ENDPOINTS, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((res, rej) =>
    child.on('close', (code) => {
      // The DSN password and the broker secret (in the environment) are never printed.
      for (const secret of [PASSWORD, env.ROCKETMQ_ACCESS_SECRET ?? PASSWORD]) {
        if (stdout.includes(secret) || stderr.includes(secret)) rej(new Error('a secret was printed'));
      }
      try {
        res({ code, stdout, stderr, report: JSON.parse(stdout) as DoctorReport });
      } catch {
        rej(new Error(`not JSON (exit ${code}): ${stdout}\n${stderr}`));
      }
    }),
  );
}

/** Everything that is not a pass or a skip, as `id status`. */
function problems(r: Result): string[] {
  return r.report.checks
    .filter((c) => c.status === 'warn' || c.status === 'fail')
    .map((c) => `${c.id} ${c.status}`);
}

function checkOf(r: Result, id: string): DoctorCheck {
  const c = r.report.checks.find((x) => x.id === id);
  if (!c) throw new Error(`no check ${id}: ${r.stdout}`);
  return c;
}

describe(`rocketmq-tx doctor against the real ${PG ? 'PostgreSQL' : 'MariaDB'} and broker`, () => {
  let root: DataSource;
  let admin: DataSource;
  const accounts = (user: string) => (PG ? [`"${user}"`] : HOSTS.map((h) => `'${user}'@'${h}'`));

  async function dropUser(user: string) {
    for (const account of accounts(user))
      await root.query(`DROP ${PG ? 'ROLE' : 'USER'} IF EXISTS ${account}`);
  }

  async function grantTo(user: string, statements: (account: string) => string[]) {
    for (const account of accounts(user))
      if (PG) await admin.query(`DROP OWNED BY ${account}`).catch(() => undefined);
    // Once, before the loop: dropping inside it would drop the account made for the host before.
    await dropUser(user);
    for (const account of accounts(user)) {
      await root.query(
        PG
          ? `CREATE ROLE ${account} LOGIN PASSWORD '${PASSWORD}'`
          : `CREATE USER ${account} IDENTIFIED BY '${PASSWORD}'`,
      );
      for (const s of statements(account)) await admin.query(s);
    }
  }

  async function insertOutbox(status: 'NEW' | 'IN_FLIGHT' | 'SENT' | 'DEAD', ageSeconds = 0, withTx = false) {
    const eventId = uuidv7();
    const txId = uuidv7();
    const at = D.ago(ageSeconds);
    if (withTx) {
      await admin.query(
        `INSERT INTO tx_record (tx_id, status, resolved_by, producer_group, topic, event_count, created_at)
         VALUES (${D.p(1)}, 'COMMITTED', 'PRODUCER', 'doctor_it', ${D.p(2)}, 1, ${at})`,
        [txId, TX],
      );
    }
    await admin.query(
      `INSERT INTO outbox_event (event_id, tx_id, topic, ${D.q('keys')}, properties, payload, occurred_at, status,
         attempts, next_attempt_at, published_at)
       VALUES (${D.p(1)}, ${D.p(2)}, ${D.p(3)}, '[]', '{}', ${D.blob}, ${at}, ${D.p(4)}, 0, ${at},
         ${status === 'SENT' ? at : 'NULL'})`,
      [eventId, txId, NORMAL, status],
    );
    return eventId;
  }

  beforeAll(async () => {
    const type = PG ? 'postgres' : 'mysql';
    root = await new DataSource({ type, url: DB_URL, poolSize: 2 }).initialize();
    await root.query(`DROP DATABASE IF EXISTS ${SCRATCH}`);
    await root.query(`CREATE DATABASE ${SCRATCH}`);
    // PostgreSQL's lock_timeout defaults to 0 (a lock wait without bound: doctor warns); the
    // deployment sets it, here for the scratch database.
    if (PG) await root.query(`ALTER DATABASE ${SCRATCH} SET lock_timeout = '10s'`);
    admin = await new DataSource({
      type,
      url: scratchUrl(),
      poolSize: 2,
      migrations: [...rocketMqTxMigrations, ...rocketMqTxArchiveMigrations],
      migrationsTableName: 'rocketmq_tx_migrations',
    }).initialize();
    await Promise.all([admin.runMigrations({ transaction: 'none' }), buildCli(BUILD)]);
    const producer = (account: string) =>
      PG
        ? rocketMqTxGrants('producer', {
            dialect: 'postgres',
            database: 'public',
            user: account.slice(1, -1),
          })
        : rocketMqTxGrants('producer', { database: SCRATCH, user: account });
    await grantTo(USERS.producer, producer);
    await grantTo(USERS.noUpdate, (a) => [
      ...(PG ? [`GRANT USAGE ON SCHEMA public TO ${a}`] : []),
      `GRANT SELECT, INSERT, UPDATE ON ${PG ? '' : `\`${SCRATCH}\`.`}${D.q('tx_record')} TO ${a}`,
      `GRANT SELECT, INSERT ON ${PG ? '' : `\`${SCRATCH}\`.`}${D.q('outbox_event')} TO ${a}`,
    ]);
    await grantTo(USERS.ddl, (a) => [
      ...producer(a),
      PG
        ? `GRANT TRUNCATE ON "tx_record" TO ${a}`
        : `GRANT DROP, ALTER ON \`${SCRATCH}\`.\`tx_record\` TO ${a}`,
    ]);
  }, 600_000);

  afterAll(async () => {
    if (PG && admin?.isInitialized) {
      for (const user of Object.values(USERS))
        await admin.query(`DROP OWNED BY "${user}"`).catch(() => undefined);
    }
    if (admin?.isInitialized) await admin.destroy();
    if (root?.isInitialized) {
      await root.query(`DROP DATABASE IF EXISTS ${SCRATCH}${PG ? ' WITH (FORCE)' : ''}`);
      for (const user of Object.values(USERS)) await dropUser(user);
      await root.destroy();
    }
    rmSync(BUILD, { recursive: true, force: true });
  });

  it('passes a healthy deployment: the producer user with exactly its grants, right topic types (exit 0)', async () => {
    const r = await doctor([...TOPIC_FLAGS, '--component', 'producer', '--retention', '7d'], USERS.producer);
    expect(problems(r)).toEqual([]);
    expect(r.code).toBe(0);
    expect(r.report).toMatchObject({ status: 'pass', exitCode: 0 });
    for (const id of [
      'db.connection',
      'schema.tx_record',
      'schema.outbox_event',
      'grants.tx_record',
      'grants.outbox_event',
      'db.isolation',
      'db.lock-wait-timeout',
      'outbox.backlog',
      'outbox.oldest-undelivered',
      'outbox.dead',
      'tx.in-doubt',
      'retention.oldest-sent',
      'clock.skew',
      'broker.connection',
      `broker.topic.${TX}`,
      `broker.topic.${NORMAL}`,
      `broker.topic.${FIFO}`,
      'options.discard-horizon',
      'options.lock-wait',
    ]) {
      expect({ id, status: checkOf(r, id).status }).toEqual({ id, status: 'pass' });
    }
    expect(checkOf(r, `broker.topic.${TX}`).value).toMatch(/^message type TRANSACTION/);
    // A Local-mode proxy (one embedded broker): no confirmBy advice.
    expect(r.report.checks.some((c) => c.id === 'broker.confirmBy')).toBe(false);
    // Tables this user cannot see and does not use are skipped, not reported missing.
    expect(checkOf(r, 'schema.consumed_event').status).toBe('skip');
    expect(r.stderr).toMatch(/doctor: checking broker: 3 topic route\(s\)/);
    // The deploy account, checked as such: every table including the archive, DDL expected.
    const deploy = await doctor([...TOPIC_FLAGS, ...DEPLOY]);
    expect(problems(deploy)).toEqual([]);
    expect(checkOf(deploy, 'schema.outbox_event_archive').status).toBe('pass');
    expect(deploy.code).toBe(0);
  });

  it('fails schema.outbox_event naming a dropped index (exit 2), and passes once it is back', async () => {
    await admin.query(D.dropIndex);
    try {
      const r = await doctor([...DEPLOY]);
      expect(problems(r)).toEqual(['schema.outbox_event fail']);
      expect(checkOf(r, 'schema.outbox_event').value).toBe(
        'missing index idx_outbox_status_next (status, next_attempt_at, event_id)',
      );
      expect(checkOf(r, 'schema.outbox_event').advice).toMatch(/run the migrations/);
      expect(r.code).toBe(2);
    } finally {
      await admin.query(
        'CREATE INDEX idx_outbox_status_next ON outbox_event (status, next_attempt_at, event_id)',
      );
    }
    expect((await doctor([...DEPLOY])).code).toBe(0);
  });

  it('warns on a backlog over --max-backlog (exit 1), fails an old undelivered NEW row (exit 2)', async () => {
    const id = await insertOutbox('NEW');
    try {
      const warn = await doctor([...DEPLOY, '--max-backlog', '0']);
      expect(problems(warn)).toEqual(['outbox.backlog warn']);
      expect(checkOf(warn, 'outbox.backlog')).toMatchObject({
        value: `1 NEW row (most: ${NORMAL})`,
        threshold: '<= 0',
      });
      expect(warn.code).toBe(1);
      await admin.query(`UPDATE outbox_event SET occurred_at = ${D.ago(7200)} WHERE event_id = ${D.p(1)}`, [
        id,
      ]);
      const fail = await doctor([...DEPLOY]);
      expect(problems(fail)).toEqual(['outbox.oldest-undelivered fail']);
      expect(checkOf(fail, 'outbox.oldest-undelivered').value).toMatch(/^2 h \(1 undelivered\)/);
      expect(fail.code).toBe(2);
    } finally {
      await admin.query(`DELETE FROM outbox_event WHERE event_id = ${D.p(1)}`, [id]);
    }
  });

  it('fails on a DEAD row (exit 2) unless --max-dead allows it', async () => {
    const id = await insertOutbox('DEAD');
    try {
      const r = await doctor([...DEPLOY]);
      expect(problems(r)).toEqual(['outbox.dead fail']);
      expect(checkOf(r, 'outbox.dead').advice).toMatch(/rocketmq-tx dead-letter list/);
      expect(r.code).toBe(2);
      expect((await doctor([...DEPLOY, '--max-dead', '1'])).code).toBe(0);
    } finally {
      await admin.query(`DELETE FROM outbox_event WHERE event_id = ${D.p(1)}`, [id]);
    }
  });

  it('warns on an in-doubt transaction past the broker check horizon and on archival behind --retention; fails an overdue one', async () => {
    const inDoubt = await insertOutbox('IN_FLIGHT', 10 * 60, true); // 10 min > 7.6 min (RocketMQ defaults)
    const sent = await insertOutbox('SENT', 9 * 86_400);
    try {
      const r = await doctor([...DEPLOY, '--retention', '7d']);
      expect(problems(r)).toEqual(['tx.in-doubt warn', 'retention.oldest-sent warn']);
      // The row is 10 min old when inserted; a slow machine adds a few seconds before the read.
      expect(checkOf(r, 'tx.in-doubt').value).toMatch(
        /^1 transaction, oldest 10(\.\d)? min; events awaiting the broker 1, overdue 0, republishing 0$/,
      );
      expect(checkOf(r, 'retention.oldest-sent').value).toMatch(/^oldest SENT 9/);
      expect(r.code).toBe(1);
      // Past the discard horizon (20 min) and taken by no discard recovery: overdue.
      await admin.query(
        `UPDATE tx_record SET created_at = ${D.ago(1500)}
         WHERE tx_id = (SELECT tx_id FROM outbox_event WHERE event_id = ${D.p(1)})`,
        [inDoubt],
      );
      await admin.query(
        `UPDATE outbox_event SET occurred_at = ${D.ago(1500)}, next_attempt_at = ${D.ago(1500)}
         WHERE event_id = ${D.p(1)}`,
        [inDoubt],
      );
      const overdue = await doctor([...DEPLOY]);
      expect(problems(overdue)).toEqual(['tx.in-doubt fail']);
      expect(checkOf(overdue, 'tx.in-doubt').value).toMatch(/overdue 1, republishing 0$/);
      expect(checkOf(overdue, 'tx.in-doubt').advice).toMatch(/discardRecovery/);
      expect(overdue.code).toBe(2);
    } finally {
      await admin.query(`DELETE FROM outbox_event WHERE event_id IN (${D.p(1)}, ${D.p(2)})`, [inDoubt, sent]);
    }
  });

  it('fails grants naming the missing privilege and table; warns on DDL held by a runtime user', async () => {
    const missing = await doctor(['--component', 'producer'], USERS.noUpdate);
    expect(problems(missing)).toEqual(['grants.outbox_event fail']);
    expect(checkOf(missing, 'grants.outbox_event').value).toMatch(
      /lacks UPDATE on outbox_event \(has INSERT, SELECT\)$/,
    );
    expect(missing.code).toBe(2);
    const ddl = await doctor(['--component', 'producer'], USERS.ddl);
    expect(problems(ddl)).toEqual(['grants.tx_record warn']);
    expect(checkOf(ddl, 'grants.tx_record').value).toMatch(
      PG ? /has TRUNCATE on tx_record/ : /has DROP, ALTER on tx_record/,
    );
    expect(ddl.code).toBe(1);
  });

  it('fails a topic of the wrong message type and an unknown topic (exit 2)', async () => {
    const unknown = `rmqtx_doctor_nosuch_${RUN}`;
    const r = await doctor([...DEPLOY, '--transaction-topics', `${NORMAL},${unknown}`]);
    expect(problems(r)).toEqual([`broker.topic.${NORMAL} fail`, `broker.topic.${unknown} fail`]);
    expect(checkOf(r, `broker.topic.${NORMAL}`)).toMatchObject({
      value: 'message type NORMAL',
      threshold: 'exists, message type TRANSACTION, writable',
    });
    expect(checkOf(r, `broker.topic.${unknown}`).value).toBe('topic does not exist');
    expect(r.code).toBe(2);
  });

  it('fails broker.connection with the typed code when the proxy cannot be reached (exit 2)', async () => {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    await new Promise<void>((r) => server.close(() => r()));
    const r = await doctor([
      '--component',
      'migrations',
      '--transaction-topics',
      TX,
      '--endpoints',
      `127.0.0.1:${port}`,
      '--request-timeout',
      '2s',
    ]);
    expect(problems(r)).toEqual(['broker.connection fail']);
    expect(checkOf(r, 'broker.connection').value).toMatch(
      /^BROKER_UNAVAILABLE: cannot reach the RocketMQ proxy at 127\.0\.0\.1:/,
    );
    expect(checkOf(r, `broker.topic.${TX}`).status).toBe('skip');
    expect(r.code).toBe(2);
  });

  it('fails broker.connection with TLS_FAILED when TLS does not verify, never printing the broker secret', async () => {
    // The local proxy's TLS port answers with a self-signed certificate: the system CAs reject it.
    const secret = `secret-${randomBytes(8).toString('hex')}`;
    const r = await doctor([...DEPLOY, '--transaction-topics', TX, '--ssl'], undefined, {
      ROCKETMQ_ACCESS_KEY: 'doctor_it',
      ROCKETMQ_ACCESS_SECRET: secret,
    });
    expect(problems(r)).toEqual(['broker.connection fail']);
    expect(checkOf(r, 'broker.connection').value).toMatch(
      /^TLS_FAILED: TLS connection to the RocketMQ proxy/,
    );
    expect(checkOf(r, 'broker.connection').advice).toMatch(/--ca-file/);
    expect(r.code).toBe(2);
  });

  it("reads the broker's transactional settings via the NameServer; fails a lock wait longer than its transactionTimeOut", async () => {
    const group = `doctor_it_group_${RUN}`;
    const args = [...DEPLOY, '--transaction-topics', TX, '--namesrv', NAMESRV, '--consumer-groups', group];
    const slow = await doctor([...args, '--lock-wait', '2s']);
    const settings = checkOf(slow, 'broker.settings');
    expect(settings.status).toBe('pass');
    const m =
      /transactionTimeOut (\d+) ms, transactionCheckInterval (\d+) ms, transactionCheckMax (\d+)$/.exec(
        settings.value,
      );
    expect(m).not.toBeNull();
    const txTimeoutMs = Number(m![1]);
    // The local broker asks after 1 s (scripts/lib/config.js): a 2 s fence wait is longer.
    expect(txTimeoutMs).toBeLessThan(2000);
    expect(checkOf(slow, 'options.lock-wait')).toMatchObject({ status: 'fail' });
    expect(checkOf(slow, 'options.lock-wait').threshold).toMatch(/transactionTimeOut/);
    expect(checkOf(slow, `broker.group.${group}`)).toMatchObject({
      status: 'pass',
      value: `retryMaxTimes 16; DLQ %DLQ%${group}: 0 messages`,
    });
    expect(slow.code).toBe(2);
    // The broker's own horizon (not the stated defaults) is what the discard horizon is checked against.
    expect(checkOf(slow, 'options.discard-horizon').threshold).toContain(
      `(${txTimeoutMs} ms + ${m![3]} x ${m![2]} ms)`,
    );
    const ok = await doctor([...args, '--lock-wait', '1s']);
    expect(checkOf(ok, 'options.lock-wait').status).toBe('pass');
    // MariaDB's server lock wait (50 s by default) outlasts the local broker's 11 s horizon: that
    // warning is real on this server; PostgreSQL's scratch database sets lock_timeout 10 s.
    expect(problems(ok).filter((p) => p !== 'db.lock-wait-timeout warn')).toEqual([]);
    if (PG) expect(ok.code).toBe(0);
  });

  it('reports a service that accepts and never answers within the bound (broker, NameServer, database), never hangs', async () => {
    const silent = new Set<net.Socket>();
    const server = net.createServer((s) => {
      silent.add(s);
      s.on('error', () => undefined);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    const url = new URL(scratchUrl());
    url.port = String(port);
    try {
      const r = await doctor(
        [
          '--transaction-topics',
          TX,
          '--endpoints',
          `127.0.0.1:${port}`,
          '--namesrv',
          `127.0.0.1:${port}`,
          '--request-timeout',
          '1s',
        ],
        undefined,
        { ROCKETMQ_TX_DB_URL: url.toString() },
      );
      expect(checkOf(r, 'broker.settings')).toMatchObject({ status: 'fail' });
      expect(checkOf(r, 'broker.settings').value).toBe(
        `no answer from 127.0.0.1:${port} within 1000 ms (request code 106)`,
      );
      expect(checkOf(r, 'broker.connection').status).toBe('fail');
      expect(checkOf(r, 'db.connection').status).toBe('fail');
      expect(r.code).toBe(2);
    } finally {
      for (const s of silent) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    }
  }, 120_000);
});
