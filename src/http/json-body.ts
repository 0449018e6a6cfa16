import type { FastifyInstance, FastifyRequest } from 'fastify';
import { InvalidJsonError, validationErrorOf } from '../errors.js';
import { jsonDepthIssue } from '../lib/json-depth.js';
import { nulIssue } from '../lib/nul.js';
import { onRoutesWhere } from './route-hooks.js';

const ESCAPED_SURROGATE = /\\u[dD][89a-fA-F]/;
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/** Whether any string (or key) in a parsed JSON value holds an unpaired surrogate. Iterative: bodies nest deep. */
function hasLoneSurrogate(root: unknown): boolean {
  const pending: unknown[] = [root];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value === 'string') {
      if (LONE_SURROGATE.test(value)) return true;
    } else if (Array.isArray(value)) {
      pending.push(...value);
    } else if (value !== null && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        if (LONE_SURROGATE.test(k)) return true;
        pending.push(v);
      }
    }
  }
  return false;
}

const ESCAPED_NUL = /\\u0000/;

/**
 * JSON is the only body type (API.md §1): an empty body reads as `{}`, anything else falls through to 415.
 * Fastify's own parser still guards against prototype poisoning. A body nested deeper than 64 levels
 * is refused here, once for every JSON route (`/mcp` included), before any validator, size check or
 * idempotency hash walks it recursively.
 */
export function registerJsonBodyParser(app: FastifyInstance) {
  app.removeAllContentTypeParsers();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser(/^application\/([\w.+-]+\+)?json\s*(;|$)/i, { parseAs: 'string' }, (req, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, {});
    return parseJson(req, text, (err, value) => {
      if (err) return done(err);
      const tooDeep = jsonDepthIssue(value);
      if (tooDeep) return done(validationErrorOf('body', [tooDeep]));
      // JSON can escape half a surrogate pair ("\ud800"): not Unicode, and stored as something else.
      if (ESCAPED_SURROGATE.test(text) && hasLoneSurrogate(value)) {
        return done(new InvalidJsonError('The request body holds an unpaired UTF-16 surrogate (\\uD800–\\uDFFF).'));
      }
      // PostgreSQL text cannot hold U+0000: refused on both backends alike (lib/nul.ts).
      const nul = ESCAPED_NUL.test(text) ? nulIssue(value) : null;
      if (nul) return done(validationErrorOf('body', [nul]));
      return done(null, value);
    });
  });
  // A bodiless POST/PUT (no Content-Type at all) is `{}` too.
  onRoutesWhere(app, (route) => [route.method].flat().some((m) => ['POST', 'PUT', 'PATCH'].includes(m)), {
    preValidation: async (request: FastifyRequest) => {
      if (request.body === undefined) request.body = {};
    },
  });
}
