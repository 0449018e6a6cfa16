import { z } from 'zod';

/** The problem+json body of every error (API.md §1). */
export const problemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string(),
    requestId: z.string(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  })
  .meta({ id: 'Problem' });

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid JSON (`invalid_json`) or a field failed validation (`validation_failed`, `errors[]` names it).',
  401: 'Missing, malformed, unknown, revoked or expired API key.',
  403: 'The key lacks the scope this operation needs.',
  404: 'No such object in this workspace.',
  409: 'Conflicts with the current state.',
  413: 'Body larger than the limit.',
  415: 'Body is not JSON.',
  429: 'Rate limit exceeded; see `Retry-After`.',
  500: 'Unexpected failure; `requestId` finds it in the logs.',
  502: 'An upstream service failed.',
  503: 'Temporarily unavailable.',
  504: 'An upstream service timed out.',
};

const problemResponse = (status: number) => ({
  description: ERROR_DESCRIPTIONS[status] ?? 'Error',
  content: { 'application/problem+json': { schema: problemSchema } },
});

/** Errors any authenticated route can answer. */
const COMMON_ERRORS = [400, 401, 403, 429, 500] as const;

/**
 * A route's `schema.response`: its success responses plus problem+json for the common errors and
 * the route's own (`extra`), so the OpenAPI document lists every answer.
 */
export function withErrors<T extends Record<number, unknown>>(
  success: T,
  extra: number[] = [],
  options: { public?: boolean } = {},
): T {
  const codes = new Set<number>(options.public ? [429, 500, ...extra] : [...COMMON_ERRORS, ...extra]);
  const errors: Record<number, ReturnType<typeof problemResponse>> = {};
  for (const code of [...codes].sort()) errors[code] = problemResponse(code);
  // Typed as the success responses only: errors are sent as strings by the error handler, never serialized.
  return { ...errors, ...success } as T;
}

/** A list response `{ data, nextCursor }` of `item`. */
export function pageOf<T extends z.ZodType>(item: T) {
  return z.object({ data: z.array(item), nextCursor: z.string().nullable() });
}

/** `:id` path parameter. Length is not validated here: an over-long id is simply not found (404). */
export const idParams = z.object({ id: z.string() });
