import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { NotFoundError } from '../../errors.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import { pageQuerySchema } from '../../lib/pagination.js';
import {
  createPersonaSchema,
  listPersonasQuerySchema,
  personaSchema,
  personaVersionSchema,
  updatePersonaSchema,
  versionParams,
} from './personas.schemas.js';

/** `:n` as a version number; anything else names a version no persona has (404). */
function versionNumber(id: string, n: string): number {
  if (!/^[1-9]\d{0,8}$/.test(n)) throw new NotFoundError('Persona version', `${id}@${n}`);
  return Number(n);
}

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
        const persona = await personas.create(actorOf(request), request.body);
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
        return personas.list(actorOf(request).workspaceId, page, q);
      },
    );

    app.get(
      '/personas/:id',
      { config: { cache: true }, schema: { tags, summary: 'Get a persona', params: idParams, response: withErrors({ 200: personaSchema }, [404]) } },
      async (request) => personas.get(actorOf(request).workspaceId, request.params.id),
    );

    app.put(
      '/personas/:id',
      {
        schema: {
          tags,
          summary: 'Update any subset of a persona’s fields',
          description: 'A change to any field adds the next version (GET /personas/{id}/versions); a body that changes nothing adds none.',
          params: idParams,
          body: updatePersonaSchema,
          response: withErrors({ 200: personaSchema }, [404, 409]),
        },
      },
      async (request) => {
        return personas.update(actorOf(request), request.params.id, request.body);
      },
    );

    app.get(
      '/personas/:id/versions',
      {
        config: { cache: true },
        schema: {
          tags,
          summary: 'List a persona’s versions, newest first',
          description: 'Version 1 is its creation; each change to its fields adds one. Versions never change.',
          params: idParams,
          querystring: pageQuerySchema.strict(),
          response: withErrors({ 200: pageOf(personaVersionSchema) }, [404]),
        },
      },
      async (request) => personas.versions(actorOf(request).workspaceId, request.params.id, request.query),
    );

    app.get(
      '/personas/:id/versions/:n',
      {
        config: { cache: true },
        schema: { tags, summary: 'Get one version of a persona', params: versionParams, response: withErrors({ 200: personaVersionSchema }, [404]) },
      },
      async (request) => {
        const { id, n } = request.params;
        return personas.version(actorOf(request).workspaceId, id, versionNumber(id, n));
      },
    );

    app.post(
      '/personas/:id/versions/:n/restore',
      {
        schema: {
          tags,
          summary: 'Make a version’s fields current again',
          description: 'Adds the next version with version n’s fields (none when they are already current) and returns the persona.',
          params: versionParams,
          response: withErrors({ 200: personaSchema }, [404, 409]),
        },
      },
      async (request) => {
        const { id, n } = request.params;
        return personas.restore(actorOf(request), id, versionNumber(id, n));
      },
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
        await personas.delete(actorOf(request), request.params.id);
        return reply.code(204).send();
      },
    );
  };
}
