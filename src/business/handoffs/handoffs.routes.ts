import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import {
  acceptSchema,
  endSchema,
  handoffDetailSchema,
  handoffMessageSchema,
  handoffSchema,
  listHandoffsQuerySchema,
  openHandoffSchema,
  replySchema,
} from './handoffs.schemas.js';

const MEMBER =
  'You act as yourself: the signed-in person, or the person the key belongs to (their e-mail is their identity in the team). Naming another `member` (e-mail or user id) needs `admin` (else 403) and is recorded in the audit log as `onBehalfOf`; a key that belongs to no person names the member it acts as. The member must be of the handoff’s team (else 400). Needs the `agent` role; an `agent` works only their own teams’ handoffs (another team’s → 404).';
/** Working a handoff is an `agent`'s job (API.md §14): below `editor`, with no write scope. */
const AGENT = { role: 'agent' } as const;

/** Human handoff (issue 29; docs/handoffs.md): a conversation goes to a person of the persona's team, and back. */
export function handoffRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const handoffs = ctx.services.handoffs;
  const tags = ['handoffs'];
  return async (app) => {
    app.post(
      '/sessions/:id/handoff',
      {
        config: { idempotent: true },
        schema: {
          tags,
          summary: 'Hand a conversation to a person of its persona’s team',
          description:
            'Offered to an available member (fewest open handoffs first), or queued when nobody is available; the user is told in the conversation. A session with an open handoff answers it (200) instead of making another. The persona needs a `teamId` (409).',
          params: idParams,
          body: openHandoffSchema,
          response: withErrors({ 201: handoffSchema, 200: handoffSchema }, [404, 409]),
        },
      },
      async (request, reply) => {
        const actor = actorOf(request);
        const session = await ctx.services.sessions.get(actor.workspaceId, request.params.id);
        const { handoff, created } = await handoffs.open(actor.workspaceId, { id: session.id, persona_id: session.personaId }, 'api', request.body.reason, true, undefined, actor);
        return reply.code(created ? 201 : 200).header('location', `/handoffs/${handoff.id}`).send(handoff);
      },
    );

    app.get(
      '/handoffs',
      {
        schema: {
          tags,
          summary: 'List handoffs, newest first (what waits for the team: ?status=queued,offered)',
          description: 'A person below `editor` (an `agent`) sees only the handoffs of teams they belong to.',
          querystring: listHandoffsQuerySchema,
          response: withErrors({ 200: pageOf(handoffSchema) }),
        },
      },
      async (request) => {
        const { status, teamId, member, ...page } = request.query;
        return handoffs.list(actorOf(request), page, { status, teamId, member });
      },
    );

    app.get(
      '/handoffs/:id',
      { schema: { tags, summary: 'Get a handoff with the conversation so far', params: idParams, response: withErrors({ 200: handoffDetailSchema }, [404]) } },
      async (request) => handoffs.get(actorOf(request), request.params.id),
    );

    app.post(
      '/handoffs/:id/accept',
      {
        schema: {
          tags,
          summary: 'Take the conversation',
          description: `Any member of the team may accept a queued or offered handoff; two at once: one wins, the other gets 409 naming who. The user is told a person joined. ${MEMBER}`,
          params: idParams,
          body: acceptSchema,
          response: withErrors({ 200: handoffSchema }, [404, 409]),
        },
        config: AGENT,
      },
      async (request) => handoffs.accept(actorOf(request), request.params.id, request.body.member),
    );

    app.post(
      '/handoffs/:id/messages',
      {
        // A creating POST: a client's retry with the same key must not repeat the reply to the user.
        config: { idempotent: true, ...AGENT },
        schema: {
          tags,
          summary: 'Reply to the user as the member who accepted',
          description: `Added to the conversation marked as from a person (\`author: "human:<email>"\`). Only the member who accepted replies (409 otherwise). Honours \`Idempotency-Key\`: a retry with the same key and body answers the first reply and sends nothing again. ${MEMBER}`,
          params: idParams,
          body: replySchema,
          response: withErrors({ 201: handoffMessageSchema }, [404, 409]),
        },
      },
      async (request, reply) => {
        const { member, text } = request.body;
        return reply.code(201).send(await handoffs.reply(actorOf(request), request.params.id, member, text));
      },
    );

    for (const [path, to, summary] of [
      ['return', 'returned', 'Hand the conversation back to the persona (it answers again, the person’s messages in its history)'],
      ['resolve', 'resolved', 'Close the handoff as resolved'],
    ] as const) {
      app.post(
        `/handoffs/:id/${path}`,
        {
          schema: {
            tags,
            summary,
            description: `The member who accepted it (or, before anyone has, any member; or, for a key that belongs to no person, the API without \`member\`). The user is told. Ended already → 409. ${MEMBER}`,
            params: idParams,
            body: endSchema,
            response: withErrors({ 200: handoffSchema }, [404, 409]),
          },
          config: AGENT,
        },
        async (request) => handoffs.end(actorOf(request), request.params.id, to, request.body.member),
      );
    }
  };
}
