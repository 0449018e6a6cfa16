import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { UnavailableError } from '../errors.js';
import { sendProblem } from './error-handler.js';
import { lazyInstance } from './lazy-instance.js';

/** Sent with every console response: no inline script, no framing, nothing from another origin. */
export const CONSOLE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/** The repository root: the nearest folder above this file holding the project's package.json (src/ under vitest, dist/src in production). */
export function repoRoot(from = path.dirname(fileURLToPath(import.meta.url))): string {
  let dir = from;
  for (;;) {
    const pkg = path.join(dir, 'package.json');
    if (fs.existsSync(pkg)) {
      try {
        if ((JSON.parse(fs.readFileSync(pkg, 'utf8')) as { name?: string }).name === 'switchboard') return dir;
      } catch {
        // not ours; keep climbing
      }
    }
    const up = path.dirname(dir);
    // Not found (an unusual install layout): assume src/http or dist/src/http below the root.
    if (up === dir) return path.resolve(from, from.includes(`${path.sep}dist${path.sep}`) ? '../../..' : '../..');
    dir = up;
  }
}

export const CONSOLE_DIR = path.join(repoRoot(), 'dist', 'console');

/**
 * The web console (issue 17): a static single-page app built by Vite into dist/console, served at
 * /console/ (`/` and `/console` redirect there). Hashed assets are immutable, the HTML `no-cache`;
 * any other /console/* path is the app's own route and gets index.html. Public: the console asks for
 * a key itself and calls the API like any client.
 *
 * The files are sent by @fastify/static (ETags, conditional and range requests) on an instance of
 * their own made at the first console request: with glob and send, it cost each start ~40 ms of a
 * loaded core and ~2 MB (issue 23).
 */
export function consoleRoutes(root = CONSOLE_DIR) {
  return async (app: FastifyInstance) => {
    const files = lazyInstance(async () => {
      const { default: fastifyStatic } = await import('@fastify/static');
      const instance = Fastify();
      await instance.register(fastifyStatic, { root, cacheControl: false });
      return instance;
    });
    app.addHook('onClose', async () => files.close());
    /** The file at `rel` (inside `root`, checked by the caller), with the caller's cache-control. */
    const sendFile = (request: FastifyRequest, reply: FastifyReply, rel: string) =>
      files.forward(request, reply, `/${rel.split('/').map(encodeURIComponent).join('/')}`);

    app.addHook('onSend', async (_request, reply, payload) => {
      reply.header('content-security-policy', CONSOLE_CSP);
      reply.header('x-content-type-options', 'nosniff');
      reply.header('referrer-policy', 'no-referrer');
      return payload;
    });

    const sendIndex = (request: FastifyRequest, reply: FastifyReply) => {
      if (!fs.existsSync(path.join(root, 'index.html'))) {
        return sendProblem(reply, new UnavailableError('The console is not built: run `npm run build` (or `npm install`), then reload.'));
      }
      reply.header('cache-control', 'no-cache');
      return sendFile(request, reply, 'index.html');
    };

    app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/console/', 302));

    // With ignoreTrailingSlash, `/console` and `/console/` are one route: redirect the bare form only.
    app.get('/console/', { schema: { hide: true } }, async (request: FastifyRequest, reply) => {
      const bare = (request.raw.url ?? '').split('?')[0];
      if (bare === '/console' || bare === '/api/console') return reply.redirect('/console/', 302);
      return sendIndex(request, reply);
    });

    app.get('/console/*', { schema: { hide: true } }, async (request: FastifyRequest<{ Params: { '*': string } }>, reply) => {
      const rel = request.params['*'] ?? '';
      const file = path.resolve(root, rel);
      const inside = file.startsWith(root + path.sep);
      if (inside && rel !== '' && fs.existsSync(file) && fs.statSync(file).isFile()) {
        if (rel.startsWith('assets/')) {
          reply.header('cache-control', 'public, max-age=31536000, immutable');
          return sendFile(request, reply, rel);
        }
        if (path.basename(rel) === 'index.html') return sendIndex(request, reply);
        reply.header('cache-control', 'no-cache');
        return sendFile(request, reply, rel);
      }
      // A missing asset is a 404, not the app: the browser would run HTML as a script otherwise.
      if (rel.startsWith('assets/') || !inside) return reply.callNotFound();
      return sendIndex(request, reply);
    });
  };
}
