/**
 * The OpenAPI document (`GET /openapi.json`) and its UI (`/docs`, API.md §11), made at their first
 * request rather than at every start: @fastify/swagger with yaml, and @fastify/swagger-ui with its
 * own @fastify/static and glob, cost a loaded core ~50 ms and ~3 MB at each start (issue 23).
 *
 * The app's routes are collected as they are added — the same route options @fastify/swagger
 * collects — and at the first request they are declared, with their schemas and no handler of
 * their own, on a separate Fastify instance that holds both plugins. The app forwards /docs to it.
 */
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import Fastify, { type FastifyInstance, type RouteOptions } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { lazyInstance } from './lazy-instance.js';

/** Where the UI is served; its own routes are `/`, `/json`, `/yaml` and `/static/*` below it. */
const DOCS_PREFIX = '/docs';

export interface ApiDocs {
  /** An `onRoute` hook: collects every route added after it (add it where @fastify/swagger would be registered). */
  collect(route: RouteOptions): void;
  /** `GET /openapi.json` and the /docs routes, forwarded to the documents app. */
  routes(app: FastifyInstance): Promise<void>;
  /** Closes the documents app, if it was made. */
  close(): Promise<void>;
}

export function createApiDocs(options: Pick<FastifyDynamicSwaggerOptions, 'openapi' | 'transform' | 'transformObject'>): ApiDocs {
  const collected: RouteOptions[] = [];
  const documents = lazyInstance(async () => {
    const [{ default: swagger }, { default: swaggerUi }] = await Promise.all([import('@fastify/swagger'), import('@fastify/swagger-ui')]);
    const docs = Fastify({ exposeHeadRoutes: false, routerOptions: { ignoreTrailingSlash: false } });
    docs.setValidatorCompiler(validatorCompiler);
    docs.setSerializerCompiler(serializerCompiler);
    await docs.register(swagger, options);
    await docs.register(swaggerUi, { routePrefix: DOCS_PREFIX });
    // What @fastify/swagger reads of a route: its method, URL, schema and config.
    const noHandler = async () => undefined;
    for (const route of collected) docs.route({ method: route.method, url: route.url, schema: route.schema, config: route.config, handler: noHandler });
    await docs.ready();
    return docs;
  });

  return {
    collect(route) {
      // Left out of the document either way: @fastify/swagger skips HEAD and hidden routes.
      if (route.method === 'HEAD' || route.schema?.hide === true) return;
      // As declared now: a later onRoute hook may trim what the live route keeps (src/app.ts).
      collected.push({ ...route, ...(route.schema ? { schema: { ...route.schema } } : {}) });
    },
    async routes(app) {
      const hidden = { schema: { hide: true } };
      app.get('/openapi.json', hidden, async () => (await documents.instance()).swagger());
      for (const url of [DOCS_PREFIX, `${DOCS_PREFIX}/json`, `${DOCS_PREFIX}/yaml`, `${DOCS_PREFIX}/static/*`]) {
        app.get(url, hidden, (request, reply) => documents.forward(request, reply));
      }
    },
    close: () => documents.close(),
  };
}
