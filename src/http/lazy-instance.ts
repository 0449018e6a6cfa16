/**
 * A separate Fastify instance made at its first request, for plugins that only some paths need
 * and that every start would otherwise pay for (issue 23): the OpenAPI document and its UI
 * (docs.ts), the console's files (console.routes.ts). The app's own routes forward to it, so its
 * hooks (request ids, auth, rate limit, CORS) apply as to any route.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Hop-by-hop and length headers of the instance's answer: the app's reply sets its own. */
const NOT_FORWARDED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'host']);

export interface LazyInstance {
  /** The instance, made now if it was not. A failure is tried again at the next call. */
  instance(): Promise<FastifyInstance>;
  /**
   * Answers with the instance's answer to GET `url` (default the request's), the request's headers
   * passed on (conditional and range requests work as there). Always a GET, so a HEAD gets the
   * GET's length; the instance's 404 becomes the app's own.
   */
  forward(request: FastifyRequest, reply: FastifyReply, url?: string): Promise<FastifyReply>;
  /** Closes the instance, if it was made. */
  close(): Promise<void>;
}

export function lazyInstance(make: () => Promise<FastifyInstance>): LazyInstance {
  let made: Promise<FastifyInstance> | undefined;
  const instance = () => {
    made ??= make().catch((err: unknown) => {
      made = undefined;
      throw err;
    });
    return made;
  };
  return {
    instance,
    async forward(request, reply, url = request.url) {
      const app = await instance();
      const headers = Object.fromEntries(Object.entries(request.headers).filter(([name]) => !NOT_FORWARDED.has(name)));
      const res = await app.inject({ method: 'GET', url, headers: headers as Record<string, string> });
      if (res.statusCode === 404) {
        reply.callNotFound();
        return reply;
      }
      for (const [name, value] of Object.entries(res.headers)) if (value !== undefined && !NOT_FORWARDED.has(name)) reply.header(name, value);
      // An empty answer (a redirect, a 304) stays without a body or a content type.
      return reply.code(res.statusCode).send(res.rawPayload.length > 0 ? res.rawPayload : undefined);
    },
    async close() {
      const app = await made?.catch(() => undefined);
      await app?.close();
    },
  };
}
