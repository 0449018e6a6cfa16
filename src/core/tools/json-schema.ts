/**
 * Parameters checked against an external tool's input JSON Schema before the call, so a bad field
 * is a 400 naming `parameters.<field>` instead of a round trip to the server.
 */
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv';
import type { Ajv2020 } from 'ajv/dist/2020.js';
import type { FieldError } from '../../errors.js';
import { isModernDraft, newAjv07, newAjv2020 } from '../../lib/ajv.js';

// Ajv is loaded and its two instances made at the first external tool's schema, not at every start.
let draft07: Ajv | undefined;
let draft2020: Ajv2020 | undefined;

/** Compiled validators by schema text; tool schemas rarely change. */
const cache = new Map<string, ValidateFunction | null>();
const CACHE_LIMIT = 1_000;

function compile(schema: Record<string, unknown>): ValidateFunction | null {
  const key = JSON.stringify(schema);
  if (cache.has(key)) return cache.get(key) ?? null;
  const { $schema, $id: _id, ...rest } = schema;
  // Made outside the try: Ajv failing to load is a fault to report, not a schema to skip.
  const ajv = isModernDraft($schema) ? (draft2020 ??= newAjv2020()) : (draft07 ??= newAjv07());
  let validate: ValidateFunction | null;
  try {
    validate = ajv.compile(rest);
  } catch {
    // A schema ajv cannot read: leave the checking to the server.
    validate = null;
  }
  if (cache.size >= CACHE_LIMIT) cache.clear();
  cache.set(key, validate);
  return validate;
}

function fieldPath(e: ErrorObject): string {
  const parts = e.instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  const params = e.params as { missingProperty?: string; additionalProperty?: string };
  if (e.keyword === 'required' && params.missingProperty) parts.push(params.missingProperty);
  if (e.keyword === 'additionalProperties' && params.additionalProperty) parts.push(params.additionalProperty);
  return ['parameters', ...parts].join('.');
}

function fieldMessage(e: ErrorObject): string {
  if (e.keyword === 'required') return 'is required';
  if (e.keyword === 'additionalProperties') return 'is not allowed';
  return e.message ?? 'is invalid';
}

/** Field errors of `parameters` against `schema`; empty when valid (or when the schema cannot be compiled). */
export function checkParameters(schema: Record<string, unknown>, parameters: Record<string, unknown>): FieldError[] {
  const validate = compile(schema);
  if (!validate || validate(parameters)) return [];
  const seen = new Set<string>();
  const errors: FieldError[] = [];
  for (const e of validate.errors ?? []) {
    const error = { path: fieldPath(e), message: fieldMessage(e) };
    const key = `${error.path} ${error.message}`;
    if (!seen.has(key)) errors.push(error);
    seen.add(key);
  }
  return errors;
}
