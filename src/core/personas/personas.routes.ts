import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { principalOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import { createPersonaSchema, listPersonasQuerySchema, personaSchema, updatePersonaSchema } from './personas.schemas.js';

/** API.md §3. */
export function personaRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const personas = ctx.services.personas;
  const tags = ['personas'];
  return async (app) => {
    app.post(
      '/personas',
      {
        config: { idempotent: true },
        schema: { tags, summary: 'Create a persona', body: createPersonaSchema, response: withErrors({ 201: personaSchema }) },
      },
      async (request, reply) => {
        const persona = await personas.create(principalOf(request).workspaceId, request.body);
        return reply.code(201).header('location', `/personas/${persona.id}`).send(persona);
      },
    );

    app.get(
      '/personas',
      {
        config: { cache: true },
        schema: {
          tags,
          summary: 'List personas, newest first',
          querystring: listPersonasQuerySchema,
          response: withErrors({ 200: pageOf(personaSchema) }),
        },
      },
      async (request) => {
        const { q, ...page } = request.query;
        return personas.list(principalOf(request).workspaceId, page, q);
      },
    );

    app.get(
      '/personas/:id',
      { config: { cache: true }, schema: { tags, summary: 'Get a persona', params: idParams, response: withErrors({ 200: personaSchema }, [404]) } },
      async (request) => personas.get(principalOf(request).workspaceId, request.params.id),
    );

    app.put(
      '/personas/:id',
      {
        schema: {
          tags,
          summary: 'Update any subset of a persona’s fields',
          params: idParams,
          body: updatePersonaSchema,
          response: withErrors({ 200: personaSchema }, [404]),
        },
      },
      async (request) => personas.update(principalOf(request).workspaceId, request.params.id, request.body),
    );

    app.delete(
      '/personas/:id',
      {
        schema: {
          tags,
          summary: 'Delete a persona',
          description: 'Its private knowledge sources (those with its `personaId`) are deleted with it.',
          params: idParams,
          response: withErrors({ 204: z.undefined().describe('Deleted') }, [404, 409]),
        },
      },
      async (request, reply) => {
        await personas.delete(principalOf(request).workspaceId, request.params.id);
        return reply.code(204).send();
      },
    );
  };
}
