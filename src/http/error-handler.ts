import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import {
  AppError,
  type FieldError,
  InternalError,
  InvalidJsonError,
  NotFoundError,
  PayloadTooLargeError,
  toProblem,
  UnsupportedMediaTypeError,
  UriTooLongError,
  ValidationError,
  validationErrorOf,
} from '../errors.js';
import { MAX_URL_LENGTH } from './client-error.js';

interface ZodIssueLike {
  instancePath: string;
  message: string;
  keyword: string;
  params: { keys?: string[] };
}

/** Zod issues as API.md field errors: dotted paths, a query parameter by its name, unknown fields each named. */
function fieldErrors(issues: ZodIssueLike[], context: string | undefined): FieldError[] {
  const out: FieldError[] = [];
  for (const issue of issues) {
    const base = issue.instancePath.split('/').filter(Boolean).join('.');
    if (issue.keyword === 'unrecognized_keys' && issue.params.keys) {
      const where = context === 'querystring' ? 'query parameter' : 'field';
      for (const key of issue.params.keys) out.push({ path: base ? `${base}.${key}` : key, message: `unknown ${where}` });
    } else {
      out.push({ path: base || (context === 'body' ? 'body' : context ?? 'request'), message: issue.message });
    }
  }
  return out;
}

/** Maps anything thrown to an AppError; unknown errors become an internal error (after logging). */
export function toAppError(err: FastifyError, request: FastifyRequest): AppError {
  if (err instanceof AppError) return err;
  if (hasZodFastifySchemaValidationErrors(err)) {
    const context = (err as { validationContext?: string }).validationContext;
    const errors = fieldErrors(err.validation as unknown as ZodIssueLike[], context);
    const where = context === 'querystring' ? 'query' : (context ?? 'request');
    return validationErrorOf(where, errors);
  }
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new InvalidJsonError();
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new PayloadTooLargeError(request.routeOptions.bodyLimit ?? 0);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return new UnsupportedMediaTypeError(
        `Content-Type ${request.headers['content-type'] ?? '(none)'} is not accepted here; send application/json.`,
      );
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ValidationError('The Content-Length header does not match the body.');
  }
  // The JSON parser's SyntaxError (and prototype-poisoning refusal) carry a 400.
  if (err instanceof SyntaxError || (err.statusCode === 400 && /JSON|prototype/i.test(err.message))) {
    return new InvalidJsonError();
  }
  if (err.statusCode === 404) return new NotFoundError('Route');
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) return new ValidationError(err.message);
  if (isResponseSerializationError(err)) {
    request.log.error({ err, issues: err.cause.issues }, 'response does not match its schema');
  } else {
    request.log.error({ err }, 'unhandled error');
  }
  return new InternalError();
}

/** The single HTTP error mapping: every failure leaves as problem+json with the request id. */
export function errorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const appError = toAppError(err, request);
  if (appError.status >= 500 && err instanceof AppError) request.log.warn({ code: appError.code }, appError.message);
  sendProblem(reply, appError);
}

/** Router failures (Fastify's `frameworkErrors`) happen before any hook: still problem+json with the request id. */
export function frameworkErrorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  reply.header('x-request-id', request.id);
  let error: AppError;
  if ((request.raw.url?.length ?? 0) > MAX_URL_LENGTH) error = new UriTooLongError(MAX_URL_LENGTH);
  // A path segment past the router's limit is an over-long id: not found (API.md §1).
  else if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') error = new NotFoundError('Resource');
  else if (err.code === 'FST_ERR_BAD_URL') error = new ValidationError('The request URL is malformed.');
  else {
    request.log.error({ err }, 'router error');
    error = new InternalError();
  }
  return sendProblem(reply, error);
}

export function sendProblem(reply: FastifyReply, error: AppError) {
  if (error.headers) reply.headers(error.headers);
  return reply
    .code(error.status)
    .type('application/problem+json')
    .send(JSON.stringify(toProblem(error, reply.request.id)));
}
