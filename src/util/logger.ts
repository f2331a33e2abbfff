/** pino-shaped logger: structured fields first, message second. pino and bunyan fit as they are. */
export interface Logger {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

const noop = (): void => undefined;
export const noopLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop };

export function errorFields(err: unknown): Record<string, unknown> {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return { err: err.message, errName: err.name, ...(code !== undefined ? { errCode: code } : {}) };
  }
  return { err: String(err) };
}
