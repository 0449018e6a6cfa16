import type { FastifyInstance } from 'fastify';
import { NotFoundError, validationErrorOf } from '../errors.js';
import { NUL_MESSAGE } from '../lib/nul.js';

/**
 * The NUL character (U+0000) in the URL, refused once for every route before anything reads it
 * (PostgreSQL text cannot hold it; lib/nul.ts): in a path parameter it names no object (404, as any
 * unknown id), in a query parameter it is a 400 naming the parameter. JSON bodies are checked by their
 * parser (json-body.ts). Runs after authentication, so a caller without a valid key still gets 401.
 */
export function registerNulGuard(app: FastifyInstance) {
  app.addHook('preParsing', (request, _reply, _payload, done) => {
    // A URL carries a NUL only percent-encoded (Node refuses a raw one); most requests stop here.
    if (!request.raw.url?.includes('%00')) return done();
    const params = request.params as Record<string, unknown> | undefined;
    for (const value of Object.values(params ?? {})) {
      if (typeof value === 'string' && value.includes('\0')) return done(new NotFoundError('Resource'));
    }
    const query = request.query as Record<string, unknown> | undefined;
    const errors = Object.entries(query ?? {})
      .filter(([name, value]) => name.includes('\0') || [value].flat().some((v) => typeof v === 'string' && v.includes('\0')))
      .map(([name]) => ({ path: name, message: NUL_MESSAGE }));
    if (errors.length > 0) return done(validationErrorOf('query', errors));
    done();
  });
}
