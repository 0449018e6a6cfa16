import type { FastifyContextConfig } from 'fastify';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requiredRole } from '../core/auth/roles.js';
import { requirementOf } from './auth-hooks.js';

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
  400: 'Invalid JSON (`invalid_json`) or a field failed validation (`validation_failed`, `errors[]` names it; a body nested deeper than 64 levels is refused so too, as is the NUL character U+0000 in a field or query parameter).',
  401: 'Missing, malformed, unknown, revoked or expired API key, or an ended sign-in session.',
  403: 'The caller\'s role (a key\'s scopes, capped by its owner\'s role) is below the one this operation needs (its `security` names it), or a signed-in request that changes something came without `X-CSRF-Token`.',
  404: 'No such object in this workspace (an id holding the NUL character U+0000 names none).',
  409: 'Conflicts with the current state.',
  410: 'Gone: a one-use link that was used, expired or revoked (`gone`).',
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

/** The error object of JSON-RPC 2.0, as the MCP transport answers its own refusals (API.md §1, §10). */
export const jsonRpcErrorSchema = z
  .object({
    jsonrpc: z.literal('2.0'),
    error: z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }),
    id: z.union([z.string(), z.number(), z.null()]),
  })
  .meta({ id: 'JsonRpcError' });

/**
 * An error response of `/mcp`, whose body is problem+json when Switchboard refuses and a JSON-RPC
 * error when the MCP transport does (`bodies` lists which this status can carry).
 */
export function mcpErrorResponse(description: string, bodies: Array<'problem' | 'jsonRpc'>) {
  return {
    description,
    content: {
      ...(bodies.includes('jsonRpc') ? { 'application/json': { schema: jsonRpcErrorSchema } } : {}),
      ...(bodies.includes('problem') ? { 'application/problem+json': { schema: problemSchema } } : {}),
    },
  };
}

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

const PARAMETER_PARTS = ['querystring', 'headers', 'params'] as const;

/**
 * The route schema → OpenAPI conversion: fastify-type-provider-zod's, except that a query, header or
 * path schema without `properties` (a record: any name goes) documents no parameters, where
 * @fastify/swagger would list its JSON Schema keywords (`type`, `propertyNames`,
 * `additionalProperties`) as parameters of those names. A route taking free-form parameters lists
 * the ones it reads with a loose object instead (GET /oauth/authorize).
 */
export const openApiTransform: typeof jsonSchemaTransform = (document) => {
  const transformed = jsonSchemaTransform(document);
  const schema = transformed.schema as Record<string, unknown> | undefined;
  const route = (document as { route?: { method: string | string[]; config?: FastifyContextConfig } }).route;
  if (schema && route && schema.security === undefined) {
    // The permission table, read where every client can: OpenAPI 3.1 lets a security requirement of
    // a non-OAuth scheme list the role names the operation needs (the console disables by it).
    const config = route.config;
    const method = Array.isArray(route.method) ? route.method[0]! : route.method;
    if (config?.public === true) schema.security = [];
    else {
      const role = requiredRole(requirementOf(method, config));
      // `/mcp` (oauth: true) does not read the sign-in cookie (auth-hooks.ts): keys and OAuth tokens only.
      schema.security = config?.oauth === true ? [{ bearer: [role] }] : [{ bearer: [role] }, { cookie: [role] }];
    }
  }
  for (const part of PARAMETER_PARTS) {
    const json = schema?.[part] as Record<string, unknown> | undefined;
    if (json === undefined || 'properties' in json || 'anyOf' in json || 'oneOf' in json || 'allOf' in json || '$ref' in json) continue;
    schema![part] = { type: 'object', properties: {} };
  }
  return transformed;
};
