import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import { feedbackResultSchema, feedbackSchema, listSessionsQuerySchema, sessionDetailSchema, sessionSchema } from './chat.schemas.js';
import { openSse } from './sse.js';

/** A session's event stream looks for new messages this often, and ends after this long (EventSource reconnects with Last-Event-ID). */
const SESSION_EVENTS_POLL_MS = 500;
const SESSION_EVENTS_MAX_MS = 15 * 60_000;
const EVENTS_BATCH = 100;

const eventsQuerySchema = z.strictObject({
  after: z.coerce
    .number()
    .int()
    .min(0)
    .optional()
    .describe('Start after this event id: a message’s position in the session (1 for its first); default: after the latest message. `Last-Event-ID` wins.'),
});

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
        return sessions.list(actorOf(request).workspaceId, page, { personaId, channelId, userId });
      },
    );

    app.get(
      '/sessions/:id',
      {
        config: { cache: true },
        schema: { tags, summary: 'A session with its messages, oldest first', params: idParams, response: withErrors({ 200: sessionDetailSchema }, [404]) },
      },
      async (request) => sessions.get(actorOf(request).workspaceId, request.params.id),
    );

    app.get(
      '/sessions/:id/events',
      {
        schema: {
          tags,
          summary: 'Follow a session: its new messages as an event stream',
          description:
            'Each new message of the session (the user’s, the persona’s, a person’s reply with `author: "human:<email>"`, a notice with `author: "system"` — a person joined or left) as an event `{ "type": "message", "message": {…} }` whose `id:` is its position in the session (1 for its first message, counting every message of the session, tool rounds too; nothing outside the session shows in it); ' +
            'what a person of the team writes after a handoff reaches an API user this way. Starts after the latest message (or `?after=`, or `Last-Event-ID` on a reconnect: nothing is missed). ' +
            'A deleted session ends the stream with `{ "type": "end", "reason": "session deleted" }`; the stream ends after 15 minutes, and an EventSource reconnects where it left off.',
          params: idParams,
          querystring: eventsQuerySchema,
          response: withErrors({ 200: { description: 'Server-Sent Events', content: { 'text/event-stream': { schema: z.string() } } } }, [404]),
        },
      },
      async (request, reply) => {
        const { workspaceId } = actorOf(request);
        const id = request.params.id;
        const lastEventId = Number(request.headers['last-event-id']);
        let cursor = await sessions.eventsStart(workspaceId, id, Number.isInteger(lastEventId) && lastEventId >= 0 ? lastEventId : request.query.after);
        const sse = openSse(reply);
        const until = Date.now() + SESSION_EVENTS_MAX_MS;
        await sse.write('retry: 1000\n\n');
        while (!sse.signal.aborted && Date.now() < until) {
          const batch = await sessions.messagesAfter(workspaceId, id, cursor, EVENTS_BATCH);
          if (batch === null) {
            await sse.write(`data: ${JSON.stringify({ type: 'end', reason: 'session deleted' })}\n\n`);
            break;
          }
          for (const { position, message } of batch) {
            await sse.write(`id: ${position}\ndata: ${JSON.stringify({ type: 'message', message })}\n\n`);
            cursor = position;
          }
          if (batch.length === EVENTS_BATCH) continue;
          await sleep(SESSION_EVENTS_POLL_MS, undefined, { signal: sse.signal }).catch(() => undefined);
        }
        sse.end();
      },
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
        const result = await sessions.feedback(actorOf(request).workspaceId, request.params.id, request.body, actorOf(request));
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
        await sessions.delete(actorOf(request), request.params.id);
        return reply.code(204).send();
      },
    );
  };
}
