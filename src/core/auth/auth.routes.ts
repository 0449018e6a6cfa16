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

/**
 * API.md §2 and §14: any member makes keys of their own (scopes at most their role) and lists,
 * rotates and revokes those; other people's keys and service keys need `admin`. The service
 * decides, so the routes ask only for a member (`viewer`). `/auth/me` is in people/sign-in.routes.ts.
 */
export function authRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const auth = ctx.services.auth;
  const tags = ['auth'];
  return async (app) => {
    app.post(
      '/auth/api-keys',
      {
        config: { role: 'viewer', idempotent: true },
        schema: {
          tags,
          summary: 'Create an API key (the secret is shown once)',
          description:
            'Made by a signed-in person, or with a key of theirs, the key belongs to that person (`userId`), with scopes at most their role (and the calling key\'s); ' +
            'without `scopes`, read and write as far as their role goes. Beyond that → 403. A service key (no `userId`) needs `admin` and makes service keys.',
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
        config: { role: 'viewer' },
        schema: {
          tags,
          summary: 'List API keys (never their secrets)',
          description: "An admin sees every key of the workspace; anyone else only their own. A service key without `admin` → 403.",
          querystring: listKeysQuerySchema,
          response: withErrors({ 200: pageOf(apiKeySchema) }),
        },
      },
      async (request) => auth.listKeys(actorOf(request), request.query),
    );

    app.put(
      '/auth/api-keys/:id',
      {
        config: { role: 'viewer' },
        schema: {
          tags,
          summary: 'Rotate an API key: new secret, same id',
          description: "Your own key, or with `admin` anyone's (else 403).",
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
        config: { role: 'viewer' },
        schema: {
          tags,
          summary: 'Revoke an API key at once',
          description: "Your own key, or with `admin` anyone's (else 403).",
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
