import type { DataSource } from 'typeorm';
import { runDoctor, type DoctorCheck } from '../../src';
import { createDataSource, LOCK_WAIT_SECONDS } from '../../samples/order-service/database';
import { DB_URL } from '../helpers/env';
import { TEST_DATABASE, ensureSchema, openDataSource } from '../helpers/db';

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/** The server's default lock-wait bound, read on a fresh connection of a plain DataSource, in seconds. */
async function defaultSeconds(ds: DataSource): Promise<number> {
  const [row] = (await ds.query(
    TEST_DATABASE === 'postgres'
      ? "SELECT setting AS v FROM pg_settings WHERE name = 'lock_timeout'"
      : 'SELECT @@SESSION.innodb_lock_wait_timeout AS v',
  )) as Array<{ v: unknown }>;
  return TEST_DATABASE === 'postgres' ? Number(row.v) / 1000 : Number(row.v);
}

async function lockWaitCheck(ds: DataSource): Promise<DoctorCheck> {
  const report = await runDoctor({ dataSource: ds, components: ['status'], logger: quiet });
  const check = report.checks.find((c) => c.id === 'db.lock-wait-timeout');
  if (!check) throw new Error('no db.lock-wait-timeout check in the report');
  return check;
}

/**
 * doctor's db.lock-wait-timeout reads what the given DataSource's connections get: the demo's
 * pool sets LOCK_WAIT_SECONDS on each connection, a plain DataSource has the server's default.
 */
describe(`doctor db.lock-wait-timeout (${TEST_DATABASE})`, () => {
  let plain: DataSource;
  let demo: DataSource;

  beforeAll(async () => {
    plain = await openDataSource();
    await ensureSchema(plain);
    demo = createDataSource(DB_URL, { poolSize: 2 });
    await demo.initialize();
  });
  afterAll(async () => {
    await demo?.destroy();
    await plain?.destroy();
  });

  it("reports the demo pool's per-connection bound, under the local broker's 11 s horizon", async () => {
    const server = await defaultSeconds(plain);
    expect(server).not.toBe(LOCK_WAIT_SECONDS); // otherwise this test could not tell the two apart
    const check = await lockWaitCheck(demo);
    expect(check.value).toMatch(
      TEST_DATABASE === 'postgres'
        ? new RegExp(`^lock_timeout ${LOCK_WAIT_SECONDS}(\\.0)? s`)
        : new RegExp(`^innodb_lock_wait_timeout ${LOCK_WAIT_SECONDS} s`),
    );
    // Default broker settings (7.6 min horizon) unless stated: 5 s passes.
    expect(check.status).toBe('pass');
    const plainCheck = await lockWaitCheck(plain);
    expect(plainCheck.value).not.toBe(check.value);
  });
});
