import * as http from 'node:http';
import type { CdcEngineState } from './engine';

/** The Prometheus names of the CDC engine's figures (docs/metrics.md). */
export const CDC_METRICS = {
  published: 'rocketmq_tx_cdc_published_total',
  skipped: 'rocketmq_tx_cdc_skipped_rows_total',
  sendRetries: 'rocketmq_tx_cdc_send_retries_total',
  restarts: 'rocketmq_tx_cdc_engine_restarts_total',
  up: 'rocketmq_tx_cdc_engine_up',
  behindEvents: 'rocketmq_tx_cdc_lag_events',
  behindSeconds: 'rocketmq_tx_cdc_lag_seconds',
} as const;

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/** The engine's state in the Prometheus text format (version 0.0.4), one sample per metric. */
export function cdcMetricsText(s: Readonly<CdcEngineState>): string {
  const label = `{engine="${escapeLabel(s.name)}"}`;
  const lines: string[] = [];
  const metric = (name: string, type: 'counter' | 'gauge', help: string, value: number | null) => {
    if (value === null) return;
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name}${label} ${value}`);
  };
  metric(
    CDC_METRICS.published,
    'counter',
    'Events the CDC engine published (acknowledged by the broker)',
    s.published,
  );
  metric(
    CDC_METRICS.skipped,
    'counter',
    "outbox_event binlog rows that were not CDC rows (the relay's)",
    s.skipped,
  );
  metric(CDC_METRICS.sendRetries, 'counter', 'Sends that failed and were retried', s.sendRetries);
  metric(
    CDC_METRICS.restarts,
    'counter',
    'Engine runs after the first (crashes, exits)',
    Math.max(0, s.restarts),
  );
  metric(CDC_METRICS.up, 'gauge', '1 while the engine runs, else 0', s.running ? 1 : 0);
  metric(
    CDC_METRICS.behindEvents,
    'gauge',
    'CDC rows committed after the last one published',
    s.behindEvents,
  );
  metric(
    CDC_METRICS.behindSeconds,
    'gauge',
    'Age of the oldest CDC row not yet published (database clock; 0 when none)',
    s.behindMs === null ? null : s.behindMs / 1000,
  );
  return `${lines.join('\n')}\n`;
}

/** Serves the engine figures at /metrics; resolves with a close function once listening. */
export function serveMetrics(
  where: { host: string; port: number },
  state: () => Readonly<CdcEngineState>,
): Promise<{ close: () => Promise<void>; port: number }> {
  const server = http.createServer((req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end('not found: GET /metrics\n');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' }).end(cdcMetricsText(state()));
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(where.port, where.host, () => {
      const address = server.address();
      resolve({
        port: typeof address === 'object' && address ? address.port : where.port,
        close: () => new Promise((r) => server.close(() => r())),
      });
    });
  });
}
