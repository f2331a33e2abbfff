/**
 * `rocketmq-tx doctor`'s broker checks against a real ACL 2.0 + TLS proxy of its own
 * (scripts/rocketmq.js with ROCKETMQ_TX_ACL=1 ROCKETMQ_TX_TLS=1, on
 * ROCKETMQ_TX_DOCTOR_SECURE_PORT_OFFSET, default 1600, and <repo>/.rocketmq-doctor-secure),
 * stopped in afterAll. Isolated project: a second broker costs CPU. Alone:
 *   npx jest test/integration/doctor-security.isolated.test.ts --selectProjects isolated --forceExit
 */
import path from 'node:path';
import type { CommandContext } from '../../src/cli/args';
import { main } from '../../src/cli/main';
import type { DoctorCheck, DoctorReport } from '../../src';
import * as rocketmq from '../../scripts/rocketmq';
import { withEnv } from '../helpers/withEnv';

const REPO = path.resolve(__dirname, '../..');
const SECURE_ENV: Record<string, string> = {
  ROCKETMQ_TX_PORT_OFFSET: process.env.ROCKETMQ_TX_DOCTOR_SECURE_PORT_OFFSET || '1600',
  ROCKETMQ_TX_HOME: process.env.ROCKETMQ_TX_DOCTOR_SECURE_HOME || path.join(REPO, '.rocketmq-doctor-secure'),
  ROCKETMQ_TX_ACL: '1',
  ROCKETMQ_TX_TLS: '1',
};
const { user: USER, denied: DENIED } = rocketmq.ACL_USERS;
const TX = 'rmqtx_tx_0';

const withSecureEnv = <T>(fn: () => Promise<T>): Promise<T> => withEnv(SECURE_ENV, fn);

describe('doctor against a real ACL 2.0 + TLS proxy', () => {
  let endpoints: string;
  let caFile: string;

  beforeAll(async () => {
    const started = await withSecureEnv(() => rocketmq.start({ quiet: true, timeoutMs: 240_000 }));
    endpoints = `127.0.0.1:${await withSecureEnv(async () => rocketmq.ports().grpc)}`;
    caFile = started.caFile ?? '';
  }, 300_000);

  afterAll(async () => {
    await withSecureEnv(() => rocketmq.stop({ quiet: true }));
  }, 60_000);

  /** The command in-process, broker checks only (a database URL that is refused at once). */
  async function doctor(args: string[], credentials?: { accessKey: string; accessSecret: string }) {
    let stdout = '';
    let stderr = '';
    const ctx: CommandContext = {
      io: {
        stdout: { write: (s: string) => (stdout += s) },
        stderr: { write: (s: string) => (stderr += s) },
        env: {
          ROCKETMQ_TX_DB_URL: 'mysql://nobody@127.0.0.1:1/none',
          ...(credentials
            ? { ROCKETMQ_ACCESS_KEY: credentials.accessKey, ROCKETMQ_ACCESS_SECRET: credentials.accessSecret }
            : {}),
        },
      },
      onSignal: () => () => undefined,
    };
    const code = await main(['doctor', '--json', '--endpoints', endpoints, ...args], ctx);
    const report = JSON.parse(stdout) as DoctorReport;
    const broker = (id: string) => report.checks.find((c) => c.id === id) as DoctorCheck;
    return { code, stdout, stderr, report, broker };
  }

  it('passes with the right user and the CA file: the topic type is read through TLS and ACL', async () => {
    const r = await doctor(['--transaction-topics', TX, '--ca-file', caFile], USER);
    expect(r.broker('broker.connection').status).toBe('pass');
    expect(r.broker(`broker.topic.${TX}`)).toMatchObject({
      status: 'pass',
      value: expect.stringMatching(/^message type TRANSACTION/),
    });
    expect(r.stdout + r.stderr).not.toContain(USER.accessSecret);
  });

  it('fails broker.connection with AUTHENTICATION_FAILED for a wrong secret, naming the key, never the secret', async () => {
    const wrong = `wrong-secret-${process.pid}`;
    const r = await doctor(['--transaction-topics', TX, '--ca-file', caFile], {
      accessKey: USER.accessKey,
      accessSecret: wrong,
    });
    const c = r.broker('broker.connection');
    expect(c.status).toBe('fail');
    expect(c.value).toMatch(/^AUTHENTICATION_FAILED: .*access key "rmqtx-user"/);
    expect(r.broker(`broker.topic.${TX}`).status).toBe('skip');
    expect(r.code).toBe(2);
    expect(r.stdout + r.stderr).not.toContain(wrong);
  });

  it('without credentials: AUTHENTICATION_FAILED (no credentials)', async () => {
    const r = await doctor(['--transaction-topics', TX, '--ca-file', caFile]);
    expect(r.broker('broker.connection').value).toMatch(/^AUTHENTICATION_FAILED: .*no credentials/);
  });

  it('a user without ACL entries: connected, but the topic check fails with AUTHORIZATION_DENIED', async () => {
    const r = await doctor(['--transaction-topics', TX, '--ca-file', caFile], DENIED);
    expect(r.broker('broker.connection').status).toBe('pass');
    expect(r.broker(`broker.topic.${TX}`)).toMatchObject({
      status: 'fail',
      value: expect.stringMatching(/^AUTHORIZATION_DENIED: .*Topic:rmqtx_tx_0/),
    });
    expect(r.broker(`broker.topic.${TX}`).advice).toMatch(/grant this user Pub/);
    expect(r.stdout + r.stderr).not.toContain(DENIED.accessSecret);
  });

  it('fails broker.connection with TLS_FAILED without the CA (system CAs do not know it)', async () => {
    const r = await doctor(['--transaction-topics', TX, '--ssl'], USER);
    expect(r.broker('broker.connection').value).toMatch(/^TLS_FAILED: /);
    expect(r.code).toBe(2);
  });
});
