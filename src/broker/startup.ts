import type { BaseClient, Endpoints } from 'rocketmq-client-nodejs';
import { BrokerUnavailableError, RocketMqTxError } from '../errors';
import { withTimeout } from '../util/time';
import { classifySecurityError } from './errors';

const NUDGE_MS = 1000;

export interface StartTarget {
  /** "producer" or "consumer", for messages. */
  what: string;
  endpoints: string;
  /** What the client asked for, named in an authorization error: "topics a, b" / "group g". */
  resource: string;
  /** The access key in use (never the secret), named in an authentication error. */
  accessKey: string | undefined;
}

/**
 * client.startup() bounded by a timeout, with two workarounds:
 * - 1.0.8 sends its settings while it fetches routes but only starts listening for the proxy's
 *   answer after every route is fetched, so with several topics the answer can arrive first and
 *   startup() waits forever. While it waits, the settings are sent again every second.
 * - It retries a failed route query three times (1 s + 2 s of backoff) even when the proxy said
 *   401/403 or the TLS handshake failed. Those fail start() at the first answer, typed and
 *   not retriable (AuthenticationError, AuthorizationError, TlsError).
 */
export async function startClient(client: BaseClient, timeoutMs: number, target: StartTarget) {
  const { what, endpoints } = target;
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

  let failFast: (err: RocketMqTxError) => void = () => undefined;
  const fatal = new Promise<never>((_, reject) => {
    failFast = reject;
  });
  const routes = client as unknown as { updateRoutes: () => Promise<void> };
  const updateRoutes = routes.updateRoutes;
  let refused: RocketMqTxError | undefined;
  routes.updateRoutes = async () => {
    // After a refusal the client's startup loop retries twice more; without this it would open
    // a new channel after our shutdown() and keep the process alive.
    if (refused) throw refused;
    try {
      await updateRoutes.call(client);
    } catch (err) {
      refused = classifySecurityError(err, endpoints, target.resource, target.accessKey);
      if (refused) failFast(refused);
      throw err;
    }
  };
  const startup = client.startup();
  // Back to the prototype's method once startup settles (the periodic refresh needs no wrapper).
  const restore = () => void delete (routes as { updateRoutes?: unknown }).updateRoutes;
  // After a fast failure the client's own retry loop still ends in a rejection: keep it handled.
  startup.then(restore, restore);
  try {
    await withTimeout(
      Promise.race([startup, fatal]),
      timeoutMs,
      () =>
        new BrokerUnavailableError(
          `RocketMQ proxy at ${endpoints} did not complete ${what} start-up within ${timeoutMs} ms`,
        ),
    );
  } catch (err) {
    if (err instanceof RocketMqTxError) throw err;
    const security = classifySecurityError(err, endpoints, target.resource, target.accessKey);
    if (security) throw security;
    throw new BrokerUnavailableError(
      `RocketMQ proxy at ${endpoints} refused ${what} start-up: ${err instanceof Error ? err.message : String(err)}`,
      err,
    );
  } finally {
    clearInterval(nudge);
  }
}
