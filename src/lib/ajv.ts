/**
 * Ajv instances for user-given JSON Schemas (tool input schemas, evaluation cases), made on
 * demand. Ajv is required at the first schema rather than imported, so a plain start does not load
 * it (issue 23; the HTTP routes validate with zod), and required rather than `import()`ed because
 * compile() is synchronous.
 */
import { createRequire } from 'node:module';
import type { Ajv } from 'ajv';
import type { Ajv2020 } from 'ajv/dist/2020.js';

const require = createRequire(import.meta.url);

/** Every error, unknown keywords and formats ignored (schemas written for other validators still compile). */
const OPTIONS = { allErrors: true, strict: false, validateFormats: false };

// The class is taken out of the module before `new`. Written in one expression,
// `new (require('ajv') as typeof import('ajv')).Ajv(OPTIONS)`, tsc emits it without the parentheses
// (`new require('ajv').Ajv(OPTIONS)`): the built server then called the class without `new` and threw
// "Class constructor … cannot be invoked without 'new'", while vitest's transform kept them (issue 40).

/** A new Ajv for draft-07 (and older) schemas. */
export function newAjv07(): Ajv {
  const { Ajv: Draft07 } = require('ajv') as typeof import('ajv');
  return new Draft07(OPTIONS);
}

/** A new Ajv for draft 2019-09 and 2020-12 schemas. */
export function newAjv2020(): Ajv2020 {
  const { Ajv2020: Draft2020 } = require('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js');
  return new Draft2020(OPTIONS);
}

/** True when `$schema` names draft 2019-09 or 2020-12, or no draft at all (the newest is assumed). */
export function isModernDraft($schema: unknown): boolean {
  return typeof $schema !== 'string' || /2019-09|2020-12/.test($schema);
}
