import { parseFlags } from '../../src/cli/args';
import { cdcFlags, planCdc } from '../../src/cli/cdc';
import { engineProperties } from '../../src/cdc/engine';
import { cdcMetricsText } from '../../src/cdc/metrics';

const plan = (argv: string[], env: Record<string, string | undefined> = {}) =>
  planCdc(parseFlags(cdcFlags, argv).flags, env, '/srv/app');

describe('rocketmq-tx cdc: flags to the engine plan', () => {
  it('defaults: MySQL URL, NameServer, home under the working directory, snapshot when_needed', () => {
    const p = plan(['--db-url', 'mysql://cdc@db.example:3306/app']);
    expect(p).toMatchObject({
      home: '/srv/app/.rocketmq-tx-cdc',
      name: 'rmqtx-cdc',
      namesrv: '127.0.0.1:9876',
      producerGroup: 'rmqtx-cdc',
      snapshotMode: 'when_needed',
      db: { host: 'db.example', port: 3306, user: 'cdc', database: 'app' },
    });
    expect(p.serverId).toBeGreaterThanOrEqual(5400);
    expect(p.serverId).toBeLessThan(6400);
  });

  it('the password comes from the environment and never reaches the properties file', () => {
    const p = plan(['--db-url', 'mysql://cdc@db:3306/app'], { ROCKETMQ_TX_DB_PASSWORD: 's3cr3t-pw' });
    expect(p.db.password).toBe('s3cr3t-pw');
    const props = engineProperties(p);
    expect(JSON.stringify(props)).not.toContain('s3cr3t-pw');
    expect(props['table.include.list']).toBe('app.outbox_event');
    expect(props['snapshot.select.statement.overrides.app.outbox_event']).toContain("status = 'CDC'");
  });

  it('PostgreSQL: the Postgres connector with pgoutput, a slot and a publication named after the engine', () => {
    const props = engineProperties(plan(['--db-url', 'postgres://cdc@pg:5432/app', '--name', 'Orders-CDC']));
    expect(props).toMatchObject({
      'connector.class': 'io.debezium.connector.postgresql.PostgresConnector',
      'database.dbname': 'app',
      'plugin.name': 'pgoutput',
      'slot.name': 'rmqtx_orders_cdc',
      'publication.name': 'rmqtx_orders_cdc_pub',
      'table.include.list': 'public.outbox_event',
    });
    expect(props['snapshot.select.statement.overrides.public.outbox_event']).toBe(
      `SELECT * FROM "public"."outbox_event" WHERE status = 'CDC'`,
    );
    expect(props['database.server.id']).toBeUndefined();
  });

  it.each([
    [['--name', 'bad name!'], /invalid --name "bad name!"/],
    [['--namesrv', 'nowhere'], /invalid --namesrv "nowhere"/],
    [['--snapshot', 'always'], /invalid --snapshot "always": expected when_needed, initial, no_data/],
    [['--server-id', '0'], /invalid --server-id "0"/],
    [['--fifo-topics', 'a', '--transaction-topics', 'a'], /topic a is in both/],
    [['--send-timeout', '5'], /invalid --send-timeout "5"/],
    [['--metrics', '9464'], /invalid --metrics "9464"/],
    [['--metrics', '127.0.0.1:70000'], /invalid --metrics "127.0.0.1:70000"/],
  ])('%j is refused with the flag and value named', (argv, message) => {
    expect(() => plan(argv as string[])).toThrow(message);
  });
});

describe('rocketmq-tx cdc: metrics text', () => {
  const state = {
    name: 'eng"1',
    published: 12,
    skipped: 3,
    sendRetries: 1,
    restarts: 2,
    lastEventId: null,
    lastSourceTsMs: null,
    lastError: null,
    running: true,
    behindEvents: 4,
    behindMs: 2500,
    updatedAt: '2026-12-06T00:00:00.000Z',
  };

  it('one sample per figure, labelled with the engine (escaped), lag in seconds', () => {
    const text = cdcMetricsText(state);
    expect(text).toContain('# TYPE rocketmq_tx_cdc_published_total counter');
    expect(text).toContain('rocketmq_tx_cdc_published_total{engine="eng\\"1"} 12');
    expect(text).toContain('rocketmq_tx_cdc_engine_restarts_total{engine="eng\\"1"} 2');
    expect(text).toContain('rocketmq_tx_cdc_engine_up{engine="eng\\"1"} 1');
    expect(text).toContain('rocketmq_tx_cdc_lag_events{engine="eng\\"1"} 4');
    expect(text).toContain('rocketmq_tx_cdc_lag_seconds{engine="eng\\"1"} 2.5');
  });

  it('a lag not measured yet is left out, not reported as 0', () => {
    const text = cdcMetricsText({
      ...state,
      behindEvents: null,
      behindMs: null,
      restarts: -1,
      running: false,
    });
    expect(text).not.toContain('rocketmq_tx_cdc_lag_');
    expect(text).toContain('rocketmq_tx_cdc_engine_restarts_total{engine="eng\\"1"} 0');
    expect(text).toContain('rocketmq_tx_cdc_engine_up{engine="eng\\"1"} 0');
  });
});
