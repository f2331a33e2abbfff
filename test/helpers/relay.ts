import type { DataSource } from 'typeorm';
import { OutboxRelay, type OutboxRelayOptions } from '../../src';
import { createGateway } from '../../src/broker/createGateway';
import type { BrokerGateway, OutgoingMessage } from '../../src/broker/gateway';
import { ENDPOINTS } from './env';
import { sql } from './db';

export interface RelayInterceptors {
  /** Runs before each send (normal or half); may hang to simulate a relay stuck mid-batch. */
  beforeSend?: (message: OutgoingMessage) => Promise<void>;
  /** Answer every check-back UNKNOWN (as if the relay could not read tx_record). */
  checkBackUnknown?: boolean;
}

/** An OutboxRelay on the real broker; records the eventIds it actually sent. */
export function makeRelay(
  dataSource: DataSource,
  options: Partial<OutboxRelayOptions> & { topics: string[] },
  interceptors: RelayInterceptors = {},
): { relay: OutboxRelay; sentEventIds: string[] } {
  const sentEventIds: string[] = [];
  const relay = new OutboxRelay(
    { endpoints: ENDPOINTS, dataSource, startTimeoutMs: 30_000, pollIntervalMs: 100, ...options },
    {
      ...(interceptors.checkBackUnknown ? { txStatus: { readStatus: async () => undefined } } : {}),
      gateway: (config, logger) => {
        const real = createGateway(config, logger);
        const record = (m: OutgoingMessage) => sentEventIds.push(m.properties.EVENT_ID ?? '');
        const wrapped: BrokerGateway = {
          start: () => real.start(),
          shutdown: () => real.shutdown(),
          send: async (m) => {
            if (interceptors.beforeSend) await interceptors.beforeSend(m);
            const r = await real.send(m);
            record(m);
            return r;
          },
          sendHalf: async (m) => {
            if (interceptors.beforeSend) await interceptors.beforeSend(m);
            const h = await real.sendHalf(m);
            record(m);
            return h;
          },
          endTransaction: (h, c) => real.endTransaction(h, c),
        };
        return wrapped;
      },
    },
  );
  return { relay, sentEventIds };
}

export async function outboxRow(
  ds: DataSource,
  eventId: string,
): Promise<{ status: string; attempts: number; last_error: string | null; tx_id: string } | undefined> {
  const rows = await ds.query(
    sql('SELECT status, attempts, last_error, tx_id FROM outbox_event WHERE event_id = ?'),
    [eventId],
  );
  return rows[0] ? { ...rows[0], attempts: Number(rows[0].attempts) } : undefined;
}

export async function countByStatus(
  ds: DataSource,
  eventIds: readonly string[],
  status: string,
): Promise<number> {
  if (eventIds.length === 0) return 0;
  const rows = await ds.query(
    sql(
      `SELECT COUNT(*) AS n FROM outbox_event WHERE status = ? AND event_id IN (${eventIds.map(() => '?').join(', ')})`,
    ),
    [status, ...eventIds],
  );
  return Number(rows[0].n);
}
