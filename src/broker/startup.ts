import type { BaseClient, Endpoints } from 'rocketmq-client-nodejs';
import { BrokerUnavailableError } from '../errors';
import { withTimeout } from '../util/time';

const NUDGE_MS = 1000;

/**
 * client.startup() bounded by a timeout, with a workaround: 1.0.8 sends its settings while it
 * fetches routes but only starts listening for the proxy's answer after every route is fetched,
 * so with several topics the answer can arrive first and startup() waits forever. While it
 * waits, the settings are sent again every second; any answer then completes it.
 */
export async function startClient(client: BaseClient, timeoutMs: number, what: string, endpoints: string) {
  const nudge = setInterval(() => {
    try {
      const command = client.settingsCommand();
      const routes = (
        client as unknown as { getTotalRouteEndpoints(): Endpoints[] }
      ).getTotalRouteEndpoints();
      for (const e of routes) client.telemetry(e, command);
    } catch {
      // Not ready yet (no route, no session): the next tick tries again.
    }
  }, NUDGE_MS);
  nudge.unref();
  try {
    await withTimeout(
      client.startup(),
      timeoutMs,
      () =>
        new BrokerUnavailableError(
          `RocketMQ proxy at ${endpoints} did not complete ${what} start-up within ${timeoutMs} ms`,
        ),
    );
  } catch (err) {
    if (err instanceof BrokerUnavailableError) throw err;
    throw new BrokerUnavailableError(
      `RocketMQ proxy at ${endpoints} refused ${what} start-up: ${err instanceof Error ? err.message : String(err)}`,
      err,
    );
  } finally {
    clearInterval(nudge);
  }
}
