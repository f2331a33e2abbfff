import { format } from 'node:util';
import type { Logger } from '../util/logger';

/**
 * Adapts our logger to the client's printf-style ILogger. Always defines debug (the client's
 * Transaction calls it unguarded) and replaces its default logger, which writes under $HOME.
 */
export function clientLogger(logger: Logger) {
  const fields = { component: 'rocketmq-client' };
  return {
    debug: (...args: unknown[]) => logger.debug(fields, format(...args)),
    info: (...args: unknown[]) => logger.debug(fields, format(...args)),
    warn: (...args: unknown[]) => logger.warn(fields, format(...args)),
    error: (...args: unknown[]) => logger.warn(fields, format(...args)),
    close: () => undefined,
  };
}
