import { optionalOtelApi } from './optional';

/** The W3C trace context of the active OpenTelemetry span, as message properties carry it. */
export interface ActiveTrace {
  /** 32 lowercase hex digits. */
  traceId: string;
  /** W3C `traceparent`: 00-<traceId>-<spanId>-<flags>. */
  traceparent: string;
  /** W3C `tracestate`, when the span has one. */
  tracestate?: string;
}

/**
 * The active span's context when @opentelemetry/api is installed and a valid span is active;
 * undefined otherwise (no package, no SDK, no span, or an invalid context). Never throws.
 */
export function activeTrace(): ActiveTrace | undefined {
  try {
    const api = optionalOtelApi();
    if (!api) return undefined;
    const span = api.trace.getSpan(api.context.active());
    if (!span) return undefined;
    const sc = span.spanContext();
    if (!api.isSpanContextValid(sc)) return undefined;
    const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, '0');
    const tracestate = sc.traceState?.serialize();
    return {
      traceId: sc.traceId,
      traceparent: `00-${sc.traceId}-${sc.spanId}-${flags}`,
      ...(tracestate ? { tracestate } : {}),
    };
  } catch {
    // Tracing is best effort: a broken tracer never blocks an event.
    return undefined;
  }
}

/** Message properties for the active trace: `traceparent` (and `tracestate`), or none. */
export function traceProperties(trace: ActiveTrace | undefined = activeTrace()): Record<string, string> {
  if (!trace) return {};
  return { traceparent: trace.traceparent, ...(trace.tracestate ? { tracestate: trace.tracestate } : {}) };
}
