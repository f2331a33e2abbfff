/**
 * ACL 2.0 + TLS against a real secure broker of its own (scripts/rocketmq.js with
 * ROCKETMQ_TX_ACL=1 ROCKETMQ_TX_TLS=1, on ROCKETMQ_TX_SECURE_PORT_OFFSET, default 300, and
 * <repo>/.rocketmq-secure), stopped in afterAll. Runs in the isolated project: a second broker
 * costs CPU the parallel files need. Alone:
 *   npx jest test/integration/security.isolated.test.ts --selectProjects isolated --forceExit
 * (--forceExit as npm test gives the isolated project: run alone in-band, jest did not exit here
 * after passing, with no open handle or socket reported by --detectOpenHandles or /proc.)
 */
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { Registry } from 'prom-client';
import { DataSource } from 'typeorm';
import {
  AuthenticationError,
  AuthorizationError,
  IdempotentConsumer,
  RocketMqTxMetrics,
  TlsError,
  defineEvent,
  on,
  rocketMqTxEntities,
  rocketMqTxMigrations,
  type CheckBackOutcome,
  type IdempotentConsumerOptions,
  type TransactionalProducer,
} from '../../src';
import { ensureSchema, openDataSource } from '../helpers/db';
import { DB_URL, waitFor } from '../helpers/env';
import { makeProducer } from '../helpers/producer';
import { makeRelay } from '../helpers/relay';

import { withEnv } from '../helpers/withEnv';

import * as rocketmq from '../../scripts/rocketmq';

const REPO = path.resolve(__dirname, '../..');
const SECURE_ENV: Record<string, string> = {
  ROCKETMQ_TX_PORT_OFFSET: process.env.ROCKETMQ_TX_SECURE_PORT_OFFSET || '300',
  ROCKETMQ_TX_HOME: process.env.ROCKETMQ_TX_SECURE_HOME || path.join(REPO, '.rocketmq-secure'),
  ROCKETMQ_TX_ACL: '1',
  ROCKETMQ_TX_TLS: '1',
};
const { user: USER, reader: READER, denied: DENIED } = rocketmq.ACL_USERS;
const TX_TOPIC = 'rmqtx_tx_0';
const NORMAL_TOPIC = 'rmqtx_normal_0';
const RUN = `${process.pid}_${Date.now().toString(36)}`;
const TAG = `run_${RUN}`;
const START_TIMEOUT_MS = 10_000;
const SENSITIVE = `SENSITIVE-BODY-${RUN}-do-not-log`;
const DB_USER = 'rmqtx_sec_test';
const DB_PASSWORD = `DbPw-${RUN}-x9Q`;

const withSecureEnv = <T>(fn: () => Promise<T>): Promise<T> => withEnv(SECURE_ENV, fn);

/** A pino-shaped logger that keeps every line of every level (fields rendered in full). */
function capturingLogger(lines: string[]) {
  const keep = (level: string) => (fields: Record<string, unknown>, message: string) =>
    lines.push(`${level} ${message} ${inspect(fields, { depth: 8, breakLength: Infinity })}`);
  return { debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') };
}

const Paid = defineEvent<{ orderId: string; note: string }>({
  eventType: 'SecurePaid',
  eventVersion: 1,
  aggregateType: 'SecureOrder',
});

async function expectRejects<T extends Error>(
  promise: Promise<unknown>,
  type: new (...args: never[]) => T,
): Promise<{ error: T; ms: number }> {
  const t0 = Date.now();
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  const ms = Date.now() - t0;
  expect(error).toBeInstanceOf(type);
  return { error: error as T, ms };
}

describe('broker security: ACL 2.0 and TLS on a real proxy', () => {
  let endpoints: string;
  let caFile: string;
  let ca: Buffer;
  let otherCa: Buffer;
  let ds: DataSource;
  /** Every captured log line, error message and metric text, searched for secrets at the end. */
  const lines: string[] = [];
  const errors: Error[] = [];

  beforeAll(async () => {
    const started = await withSecureEnv(() => rocketmq.start({ quiet: true, timeoutMs: 240_000 }));
    console.log(`secure broker (ACL + TLS) ready in ${((started.ms ?? 0) / 1000).toFixed(1)} s`);
    endpoints = `127.0.0.1:${await withSecureEnv(async () => rocketmq.ports().grpc)}`;
    caFile = started.caFile ?? '';
    ca = readFileSync(caFile);
    otherCa = readFileSync(
      rocketmq.generateCa(path.join(SECURE_ENV.ROCKETMQ_TX_HOME, 'tls-other'), { name: 'not the proxy CA' })
        .caCert,
    );
    ds = await openDataSource();
    await ensureSchema(ds);
  }, 300_000);

  afterAll(async () => {
    await ds?.destroy();
    await withSecureEnv(() => rocketmq.stop({ quiet: true }));
  }, 60_000);

  function producer(
    extra: Partial<Parameters<typeof makeProducer>[1]>,
    interceptors: Parameters<typeof makeProducer>[2] = {},
    dataSource: DataSource = ds,
  ): TransactionalProducer {
    return makeProducer(
      dataSource,
      {
        endpoints,
        topics: [TX_TOPIC],
        producerGroup: `it_secure_${RUN}`,
        startTimeoutMs: START_TIMEOUT_MS,
        tls: { ca },
        logger: capturingLogger(lines),
        ...extra,
      },
      interceptors,
    );
  }

  function consumer(extra: Partial<IdempotentConsumerOptions>, dataSource: DataSource = ds) {
    return new IdempotentConsumer({
      endpoints,
      dataSource,
      consumerGroup: `it_secure_c_${RUN}`,
      subscriptions: [{ topic: TX_TOPIC, tag: TAG }],
      handlers: [on(Paid, async () => undefined)],
      startTimeoutMs: START_TIMEOUT_MS,
      tls: { ca },
      logger: capturingLogger(lines),
      ...extra,
    });
  }

  it('without credentials, producer and consumer start() fail with a non-retriable AuthenticationError, at once', async () => {
    const p = producer({});
    const { error, ms } = await expectRejects(p.start(), AuthenticationError);
    expect(error.code).toBe('AUTHENTICATION_FAILED');
    expect(error.retriable).toBe(false);
    expect(error.message).toMatch(/no credentials/);
    expect(ms).toBeLessThan(START_TIMEOUT_MS);
    const c = consumer({});
    const consumerFailure = await expectRejects(c.start(), AuthenticationError);
    expect(consumerFailure.ms).toBeLessThan(START_TIMEOUT_MS);
    errors.push(error, consumerFailure.error);
    await Promise.all([p.shutdown(), c.shutdown()]);
  });

  it('a wrong secret fails start() with AuthenticationError naming the access key, not the secret', async () => {
    const wrong = `wrong-secret-${RUN}`;
    const p = producer({ credentials: { accessKey: USER.accessKey, accessSecret: wrong } });
    const { error, ms } = await expectRejects(p.start(), AuthenticationError);
    expect(error.retriable).toBe(false);
    expect(ms).toBeLessThan(START_TIMEOUT_MS);
    expect(error.message).toContain(USER.accessKey);
    expect(inspect(error, { depth: 8 })).not.toContain(wrong);
    expect(lines.join('\n')).not.toContain(wrong);
    errors.push(error);
    await p.shutdown();
  });

  it('a user without permission on the topic gets AuthorizationError from producer and consumer', async () => {
    const p = producer({ credentials: DENIED });
    const { error, ms } = await expectRejects(p.start(), AuthorizationError);
    expect(error.code).toBe('AUTHORIZATION_DENIED');
    expect(error.retriable).toBe(false);
    expect(error.resource).toBe(`Topic:${TX_TOPIC}`);
    expect(ms).toBeLessThan(START_TIMEOUT_MS);
    const c = consumer({ credentials: DENIED });
    const consumerFailure = await expectRejects(c.start(), AuthorizationError);
    expect(consumerFailure.error.retriable).toBe(false);
    errors.push(error, consumerFailure.error);
    await Promise.all([p.shutdown(), c.shutdown()]);
  });

  it('a user with Sub but not Pub on the topic: its consumer starts, its producer gets AuthorizationError', async () => {
    // The proxy checks Pub when the producer's settings (its topics) arrive, so start() fails.
    const p = producer({ credentials: READER });
    const { error, ms } = await expectRejects(p.start(), AuthorizationError);
    expect(error.retriable).toBe(false);
    expect(error.resource).toBe(`Topic:${TX_TOPIC}`);
    expect(error.message).toContain(READER.accessKey);
    expect(ms).toBeLessThan(START_TIMEOUT_MS);
    errors.push(error);
    const c = consumer({ credentials: READER, consumerGroup: `it_secure_reader_${RUN}` });
    try {
      await c.start();
    } finally {
      await Promise.all([p.shutdown(), c.shutdown()]);
    }
  });

  it('a CA that did not sign the proxy certificate fails start() with TlsError, not a timeout', async () => {
    const p = producer({ credentials: USER, tls: { ca: otherCa } });
    const { error, ms } = await expectRejects(p.start(), TlsError);
    expect(error.code).toBe('TLS_FAILED');
    expect(error.retriable).toBe(false);
    expect(error.message).toMatch(/TLS/);
    expect(error.message).toMatch(/certificate/);
    expect(ms).toBeLessThan(START_TIMEOUT_MS);
    errors.push(error);
    await p.shutdown();
  });

  it('with credentials and the generated CA: transact, check-back COMMIT, relay and consumer deliver; no secret is ever logged', async () => {
    // A MariaDB user with a password, so the DataSource's DSN carries a secret too.
    const dbName = new URL(DB_URL).pathname.slice(1);
    for (const host of ['%', 'localhost', '127.0.0.1']) {
      await ds.query(`CREATE USER IF NOT EXISTS '${DB_USER}'@'${host}' IDENTIFIED BY '${DB_PASSWORD}'`);
      await ds.query(`ALTER USER '${DB_USER}'@'${host}' IDENTIFIED BY '${DB_PASSWORD}'`);
      await ds.query(`GRANT ALL PRIVILEGES ON \`${dbName}\`.* TO '${DB_USER}'@'${host}'`);
    }
    const dsn = new URL(DB_URL);
    dsn.username = DB_USER;
    dsn.password = DB_PASSWORD;
    const userDs = new DataSource({
      type: 'mysql',
      url: dsn.toString(),
      entities: [...rocketMqTxEntities],
      migrations: [...rocketMqTxMigrations],
      migrationsTableName: 'rocketmq_tx_migrations',
      poolSize: 8,
      logging: false,
    });
    await userDs.initialize();

    const registry = new Registry();
    const metrics = new RocketMqTxMetrics({ register: registry });
    const applied: string[] = [];
    const answers: CheckBackOutcome[] = [];
    let dropEnd = false;
    const p = producer(
      {
        credentials: USER,
        tls: { caFile },
        topics: [TX_TOPIC, NORMAL_TOPIC],
        checkBack: { onResolved: (o) => answers.push(o) },
      },
      { beforeEnd: async () => !dropEnd },
      userDs,
    );
    const { relay } = makeRelay(userDs, {
      endpoints,
      topics: [NORMAL_TOPIC],
      credentials: USER,
      tls: { caFile },
      startTimeoutMs: START_TIMEOUT_MS,
      logger: capturingLogger(lines),
    });
    const c = consumer(
      {
        credentials: USER,
        subscriptions: [
          { topic: TX_TOPIC, tag: TAG },
          { topic: NORMAL_TOPIC, tag: TAG },
        ],
        handlers: [on(Paid, async (e) => void applied.push(e.eventId))],
        retry: { initialDelayMs: 200, maxDelayMs: 1000 },
      },
      userDs,
    );
    metrics.attach(p);
    metrics.attach(relay);
    metrics.attach(c);
    try {
      await Promise.all([p.start(), c.start(), relay.start()]);
      const event = (n: number) =>
        Paid.create({
          aggregateId: `sec-${RUN}-${n}`,
          aggregateVersion: 1,
          data: { orderId: `o-${n}`, note: SENSITIVE },
        });

      // 1. Transactional message, EndTransaction sent.
      const first = event(1);
      await p.transact({ topic: TX_TOPIC, tag: TAG, event: first }, async () => 'ok');
      // 2. EndTransaction lost: the check-back over the authenticated TLS session answers COMMIT.
      dropEnd = true;
      const second = event(2);
      const r2 = await p.transact({ topic: TX_TOPIC, tag: TAG, event: second }, async () => 'ok');
      dropEnd = false;
      // 3. Outbox row delivered by the relay.
      const third = event(3);
      await p.transact({ topic: NORMAL_TOPIC, tag: TAG, event: third }, async () => 'ok', {
        delivery: 'outbox',
      });

      await waitFor(
        () => answers.some((a) => a.messageId === r2.messageIds[0] && a.resolution === 'COMMIT'),
        { timeoutMs: 60_000, description: 'the check-back to answer COMMIT for the dropped EndTransaction' },
      );
      await waitFor(() => [first, second, third].every((e) => applied.includes(e.eventId)), {
        timeoutMs: 60_000,
        description: 'all three events applied by the consumer',
      });
      expect(applied.filter((id) => [first, second, third].some((e) => e.eventId === id))).toHaveLength(3);
      const metricsText = await registry.metrics();
      expect(metricsText).toContain('rocketmq_tx_');
      lines.push(metricsText);
    } finally {
      await Promise.all([c.shutdown(), relay.shutdown(), p.shutdown()]);
      await userDs.destroy();
      for (const host of ['%', 'localhost', '127.0.0.1']) {
        await ds.query(`DROP USER IF EXISTS '${DB_USER}'@'${host}'`);
      }
    }

    // Secrets: nothing captured (every log level, the client library's log via our logger, every
    // error above, the metrics text) contains a secret, the DB password or the sensitive body.
    const haystack = [...lines, ...errors.map((e) => inspect(e, { depth: 8 }))].join('\n');
    expect(lines.length).toBeGreaterThan(20);
    // The client library's own log reaches the capturing logger (src/broker/clientLogger.ts).
    expect(lines.some((l) => l.includes("component: 'rocketmq-client'"))).toBe(true);
    expect(haystack).toContain(USER.accessKey); // what is allowed to appear
    for (const secret of [USER.accessSecret, DENIED.accessSecret, rocketmq.ACL_USERS.admin.accessSecret]) {
      expect(haystack).not.toContain(secret);
    }
    expect(haystack).not.toContain(DB_PASSWORD);
    expect(haystack).not.toContain(SENSITIVE);
    expect(haystack).not.toContain(Buffer.from(SENSITIVE).toString('base64'));
  });
});
