/** A field-level problem: `path` is dotted (`traits.3`), a query parameter by its name. */
export interface FieldError {
  path: string;
  message: string;
}

export type ErrorCode =
  | 'invalid_json'
  | 'validation_failed'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'payload_too_large'
  | 'uri_too_long'
  | 'gone'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'headers_too_large'
  | 'internal'
  | 'upstream_error'
  | 'unavailable'
  | 'upstream_timeout';

const TITLES: Record<ErrorCode, [number, string]> = {
  invalid_json: [400, 'Malformed JSON'],
  validation_failed: [400, 'Validation failed'],
  unauthorized: [401, 'Unauthorized'],
  forbidden: [403, 'Forbidden'],
  not_found: [404, 'Not found'],
  conflict: [409, 'Conflict'],
  payload_too_large: [413, 'Payload too large'],
  uri_too_long: [414, 'URI too long'],
  gone: [410, 'Gone'],
  unsupported_media_type: [415, 'Unsupported media type'],
  rate_limited: [429, 'Too many requests'],
  headers_too_large: [431, 'Request header fields too large'],
  internal: [500, 'Internal server error'],
  upstream_error: [502, 'Upstream error'],
  unavailable: [503, 'Service unavailable'],
  upstream_timeout: [504, 'Upstream timeout'],
};

/** Every failure the services report. One handler maps it to problem+json (HTTP) or isError (MCP). */
export class AppError extends Error {
  readonly status: number;
  readonly title: string;
  constructor(
    readonly code: ErrorCode,
    detail: string,
    readonly errors?: FieldError[],
    /** Extra response headers (Retry-After, WWW-Authenticate...). */
    readonly headers?: Record<string, string>,
  ) {
    super(detail);
    const [status, title] = TITLES[code];
    this.status = status;
    this.title = title;
    this.name = new.target.name;
  }
}

export class ValidationError extends AppError {
  constructor(detail: string, errors?: FieldError[]) {
    super('validation_failed', detail, errors);
  }
  /** A single bad field, the common case in services. */
  static field(path: string, message: string): ValidationError {
    return new ValidationError(`${path}: ${message}`, [{ path, message }]);
  }
}
export class InvalidJsonError extends AppError {
  constructor(detail = 'The request body is not valid JSON.') {
    super('invalid_json', detail);
  }
}
export class UnauthorizedError extends AppError {
  constructor(detail = 'A valid API key is required: send "Authorization: Bearer <key>".') {
    super('unauthorized', detail, undefined, { 'www-authenticate': 'Bearer realm="switchboard"' });
  }
}
export class ForbiddenError extends AppError {
  constructor(detail: string) {
    super('forbidden', detail);
  }
}
export class NotFoundError extends AppError {
  constructor(what: string, id?: string) {
    super('not_found', id === undefined ? `${what} not found.` : `${what} ${id} not found.`);
  }
}
export class ConflictError extends AppError {
  constructor(detail: string) {
    super('conflict', detail);
  }
}
/** A one-use thing (an invitation link) that was used, expired or revoked. */
export class GoneError extends AppError {
  constructor(detail: string) {
    super('gone', detail);
  }
}
export class PayloadTooLargeError extends AppError {
  constructor(limitBytes: number) {
    super('payload_too_large', `The request body exceeds the limit of ${limitBytes} bytes.`);
  }
}
export class UriTooLongError extends AppError {
  constructor(limit: number) {
    super('uri_too_long', `The request URI exceeds ${limit} characters.`);
  }
}
export class UnsupportedMediaTypeError extends AppError {
  constructor(detail = 'Send the body as application/json.') {
    super('unsupported_media_type', detail);
  }
}
export class RateLimitedError extends AppError {
  constructor(retryAfterSeconds: number) {
    super('rate_limited', `Rate limit exceeded; retry in ${retryAfterSeconds} s.`, undefined, {
      'retry-after': String(retryAfterSeconds),
    });
  }
}
export class HeadersTooLargeError extends AppError {
  constructor() {
    super('headers_too_large', 'The request headers are too large.');
  }
}
export class InternalError extends AppError {
  constructor() {
    super('internal', 'An unexpected error occurred; the request id identifies it in the logs.');
  }
}
export class UpstreamError extends AppError {
  constructor(detail: string) {
    super('upstream_error', detail);
  }
}
export class UnavailableError extends AppError {
  constructor(detail: string) {
    super('unavailable', detail);
  }
}
export class UpstreamTimeoutError extends AppError {
  constructor(detail: string) {
    super('upstream_timeout', detail);
  }
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  requestId: string;
  errors?: FieldError[];
}

/** The problem+json body of API.md §1 for an AppError. */
export function toProblem(err: AppError, requestId: string): Problem {
  const problem: Problem = {
    type: `https://switchboard.dev/errors/${err.code}`,
    title: err.title,
    status: err.status,
    detail: err.message,
    code: err.code,
    requestId,
  };
  if (err.errors && err.errors.length > 0) problem.errors = err.errors;
  return problem;
}

interface ZodIssueShape {
  code: string;
  path: PropertyKey[];
  message: string;
  keys?: string[];
}

/**
 * Field errors of a failed zod parse, named as API.md §1 names them: dotted paths (under `prefix`
 * when given), each unknown field on its own, and `root` for the value itself (`arguments`, `body`).
 * The HTTP validator's issues and MCP tool arguments both come through here, so a client reads the
 * same detail either way.
 */
export function zodFieldErrors(issues: readonly ZodIssueShape[], prefix?: string, root = prefix ?? 'arguments'): FieldError[] {
  const join = (path: PropertyKey[]) => [...(prefix ? [prefix] : []), ...path.map(String)].join('.');
  return issues.flatMap((issue) =>
    issue.code === 'unrecognized_keys' && issue.keys
      ? issue.keys.map((key) => ({ path: join([...issue.path, key]), message: 'unknown field' }))
      : [{ path: join(issue.path) || root, message: issue.message }],
  );
}

/** A ValidationError listing every field error, with the detail the HTTP API writes. */
export function validationErrorOf(where: string, errors: FieldError[]): ValidationError {
  return new ValidationError(`Invalid ${where}: ${errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`, errors);
}

/**
 * The MCP face of an AppError: a tool result with `isError: true` whose text is the problem's
 * title and detail, as the HTTP problem+json would say it (never a stack trace).
 */
export function toToolErrorResult(err: AppError): { isError: true; content: Array<{ type: 'text'; text: string }> } {
  return { isError: true, content: [{ type: 'text', text: `${err.title}: ${err.message}` }] };
}
