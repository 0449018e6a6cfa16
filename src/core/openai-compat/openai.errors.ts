/**
 * The one mapping of AppErrors to OpenAI's error shape `{ error: { message, type, param, code } }`
 * on /v1 (everything else answers problem+json). Statuses stay those of the rest of the API.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, NotFoundError } from '../../errors.js';
import { toAppError } from '../../http/error-handler.js';
import { UNSUPPORTED_PARAMETER, UNSUPPORTED_VALUE } from './openai.schemas.js';

/** `model` names no persona and no A/B test of the workspace: 404 `model_not_found`. */
export class ModelNotFoundError extends AppError {
  constructor(model: string) {
    super('not_found', `The model '${model}' does not exist: use a persona id or a running A/B test id from GET /v1/models.`);
  }
}

export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** `messages.0.content` → `messages[0].content`, as OpenAI names parameters. */
function paramOf(path: string): string {
  return path.split('.').reduce((out, seg) => (/^\d+$/.test(seg) ? `${out}[${seg}]` : out === '' ? seg : `${out}.${seg}`), '');
}

function validationCode(message: string): string {
  if (message === 'unknown field') return 'unknown_parameter';
  if (message.startsWith(UNSUPPORTED_PARAMETER)) return 'unsupported_parameter';
  if (message.startsWith(UNSUPPORTED_VALUE)) return 'unsupported_value';
  if (/required/i.test(message)) return 'missing_required_parameter';
  return 'invalid_value';
}

export function toOpenAiError(err: AppError): OpenAiErrorBody {
  const first = err.errors?.[0];
  let type = 'invalid_request_error';
  let code: string | null = err.code;
  let param: string | null = null;
  if (err instanceof ModelNotFoundError) {
    code = 'model_not_found';
    param = 'model';
  } else if (err.code === 'validation_failed') {
    code = first ? validationCode(first.message) : 'invalid_value';
    param = first ? paramOf(first.path) : null;
  } else if (err.code === 'unauthorized') code = 'invalid_api_key';
  else if (err.code === 'forbidden') {
    type = 'permission_error';
    code = 'insufficient_permissions';
  } else if (err.code === 'rate_limited') {
    type = 'requests';
    code = 'rate_limit_exceeded';
  } else if (err.status >= 500) type = 'api_error';
  // A single bad field: say it plainly, as OpenAI does, rather than the problem+json summary.
  const message = first && err.errors?.length === 1 ? `Invalid '${paramOf(first.path)}': ${first.message}.` : err.message;
  return { error: { message, type, param, code } };
}

/** Sends an AppError in OpenAI's shape, with its headers (Retry-After, WWW-Authenticate). */
export function sendOpenAiError(reply: FastifyReply, err: AppError) {
  if (err.headers) reply.headers(err.headers);
  return reply.code(err.status).type('application/json; charset=utf-8').send(JSON.stringify(toOpenAiError(err)));
}

/** The /v1 plugin's error handler: hook failures (401, 403, 429) and route failures alike. */
export function openAiErrorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const appError = toAppError(err, request);
  if (appError.status >= 500 && err instanceof AppError) request.log.warn({ code: appError.code }, appError.message);
  return sendOpenAiError(reply, appError);
}

/** A route under /v1 that does not exist. */
export function openAiNotFound(request: FastifyRequest, reply: FastifyReply) {
  return sendOpenAiError(reply, new NotFoundError(`Route ${request.method} ${request.url.split('?')[0]}`));
}
