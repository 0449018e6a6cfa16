import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { principalOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import { feedbackResultSchema, feedbackSchema, listSessionsQuerySchema, sessionDetailSchema, sessionSchema } from './chat.schemas.js';

/** API.md §5: sessions. */
export function sessionRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const sessions = ctx.services.sessions;
  const tags = ['sessions'];
  return async (app) => {
    app.get(
      '/sessions',
      {
        config: { cache: true },
        schema: { tags, summary: 'List sessions, newest first', querystring: listSessionsQuerySchema, response: withErrors({ 200: pageOf(sessionSchema) }) },
      },
      async (request) => {
        const { personaId, channelId, userId, ...page } = request.query;
        return sessions.list(principalOf(request).workspaceId, page, { personaId, channelId, userId });
      },
    );

    app.get(
      '/sessions/:id',
      {
        config: { cache: true },
        schema: { tags, summary: 'A session with its messages, oldest first', params: idParams, response: withErrors({ 200: sessionDetailSchema }, [404]) },
      },
      async (request) => sessions.get(principalOf(request).workspaceId, request.params.id),
    );

    app.post(
      '/sessions/:id/feedback',
      {
        schema: {
          tags,
          summary: 'Rate an answer (feeds the satisfaction metric)',
          params: idParams,
          body: feedbackSchema,
          response: withErrors({ 201: feedbackResultSchema }, [404]),
        },
      },
      async (request, reply) => {
        const result = await sessions.feedback(principalOf(request).workspaceId, request.params.id, request.body);
        return reply.code(201).header('location', `/sessions/${result.sessionId}`).send(result);
      },
    );

    app.delete(
      '/sessions/:id',
      {
        schema: {
          tags,
          summary: 'Delete a session and its messages',
          description: 'Analytics keep the numbers of its answers (latency, tokens, ratings), not their text.',
          params: idParams,
          response: withErrors({ 204: z.undefined().describe('Deleted') }, [404]),
        },
      },
      async (request, reply) => {
        await sessions.delete(principalOf(request).workspaceId, request.params.id);
        return reply.code(204).send();
      },
    );
  };
}
