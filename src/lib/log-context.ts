/**
 * Fields every log line written during a piece of work carries, whichever module writes it: the
 * logger's mixin (logger.ts) reads them from here. An MCP tool call whose `_meta` names a W3C trace
 * context (`traceparent`) runs inside one, so its lines can be joined to the caller's trace.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export type LogFields = Readonly<Record<string, string>>;

const current = new AsyncLocalStorage<LogFields>();
const NONE: LogFields = Object.freeze({});

/** Runs `work` with `fields` on every log line it writes (nested contexts add to the outer one). */
export function withLogContext<T>(fields: LogFields, work: () => T): T {
  const outer = current.getStore();
  return current.run(outer ? { ...outer, ...fields } : fields, work);
}

/** The fields of the work running now; an empty object outside any. */
export function logContext(): LogFields {
  return current.getStore() ?? NONE;
}

// version "-" trace-id "-" parent-id "-" trace-flags, lower-case hex (W3C Trace Context, level 1).
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?$/;

/**
 * The log fields of a `traceparent` value, named as OpenTelemetry's log correlation names them
 * (`trace_id`, `span_id`: the caller's span, `trace_flags`); undefined when it is not a valid one,
 * which is then ignored, as the W3C recommendation says (never an error for the caller).
 */
export function traceFields(traceparent: unknown): LogFields | undefined {
  if (typeof traceparent !== 'string' || traceparent.length > 512) return undefined;
  const m = TRACEPARENT.exec(traceparent);
  if (!m) return undefined;
  const [, version, traceId, spanId, flags] = m as unknown as [string, string, string, string, string];
  // Version ff is invalid; version 00 has exactly four fields; ids of zeros are invalid.
  if (version === 'ff' || (version === '00' && traceparent.length !== 55)) return undefined;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { trace_id: traceId, span_id: spanId, trace_flags: flags };
}
