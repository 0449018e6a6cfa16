import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type LogArgs = [unknown, ...unknown[]];

/**
 * Fastify's per-request logger (`request.log`, bound to the request id), made the first time a line
 * is written at an enabled level. pino builds a child's bindings through the redaction serializer
 * (the `*.key` wildcards of REDACT_PATHS apply to every binding): ~1.9 µs per request, which a
 * request that logs nothing (any level above `info`) need not pay (issue 18: the authenticated
 * `GET /personas` costs ~31 µs of server CPU). Lines, redaction and bindings are pino's own.
 */
class RequestLogger {
  readonly #parent: Logger;
  readonly #bindings: Bindings;
  readonly #options: ChildLoggerOptions;
  #child: Logger | undefined;

  constructor(parent: Logger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  #logger(): Logger {
    return (this.#child ??= this.#parent.child(this.#bindings, this.#options));
  }

  #write(level: Level, args: LogArgs) {
    const current = this.#child ?? this.#parent;
    if (!current.isLevelEnabled(level)) return;
    (this.#logger()[level] as (...a: LogArgs) => void)(...args);
  }

  get level(): string {
    return (this.#child ?? this.#parent).level;
  }

  set level(level: string) {
    this.#logger().level = level;
  }

  isLevelEnabled(level: string): boolean {
    return (this.#child ?? this.#parent).isLevelEnabled(level);
  }

  fatal(...args: LogArgs) {
    this.#write('fatal', args);
  }
  error(...args: LogArgs) {
    this.#write('error', args);
  }
  warn(...args: LogArgs) {
    this.#write('warn', args);
  }
  info(...args: LogArgs) {
    this.#write('info', args);
  }
  debug(...args: LogArgs) {
    this.#write('debug', args);
  }
  trace(...args: LogArgs) {
    this.#write('trace', args);
  }
  silent() {}

  child(bindings: Bindings, options?: ChildLoggerOptions): Logger {
    return this.#logger().child(bindings, options);
  }
}

/** Fastify's `childLoggerFactory` for an app on a pino logger: a RequestLogger for each request. */
export function requestLogger(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new RequestLogger(logger as unknown as Logger, bindings, options) as unknown as FastifyBaseLogger;
}
