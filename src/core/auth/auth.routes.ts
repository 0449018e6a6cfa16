import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import {
  apiKeySchema,
  apiKeyWithSecretSchema,
  createKeySchema,
  listKeysQuerySchema,
  rotateKeySchema,
} from './auth.schemas.js';

/** API.md §2: keys are managed with the `admin` scope (`/auth/me` is in people/sign-in.routes.ts). */
export function authRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const auth = ctx.services.auth;
  const tags = ['auth'];
  return async (app) => {
    app.post(
      '/auth/api-keys',
      {
        config: { scope: 'admin', idempotent: true },
        schema: {
          tags,
          summary: 'Create an API key (the secret is shown once)',
          body: createKeySchema,
          response: withErrors({ 201: apiKeyWithSecretSchema }),
        },
      },
      async (request, reply) => {
        const key = await auth.createKey(actorOf(request), request.body);
        return reply.code(201).header('location', `/auth/api-keys/${key.id}`).send(key);
      },
    );

    app.get(
      '/auth/api-keys',
      {
        config: { scope: 'admin' },
        schema: {
          tags,
          summary: 'List API keys (never their secrets)',
          querystring: listKeysQuerySchema,
          response: withErrors({ 200: pageOf(apiKeySchema) }),
        },
      },
      async (request) => auth.listKeys(actorOf(request), request.query),
    );

    app.put(
      '/auth/api-keys/:id',
      {
        config: { scope: 'admin' },
        schema: {
          tags,
          summary: 'Rotate an API key: new secret, same id',
          params: idParams,
          body: rotateKeySchema,
          response: withErrors({ 200: apiKeyWithSecretSchema }, [404, 409]),
        },
      },
      async (request) => auth.rotateKey(actorOf(request), request.params.id, request.body.gracePeriodSeconds),
    );

    app.delete(
      '/auth/api-keys/:id',
      {
        config: { scope: 'admin' },
        schema: {
          tags,
          summary: 'Revoke an API key at once',
          params: idParams,
          response: withErrors({ 204: z.undefined().describe('Revoked') }, [404, 409]),
        },
      },
      async (request, reply) => {
        await auth.revokeKey(actorOf(request), request.params.id);
        return reply.code(204).send();
      },
    );

  };
}
