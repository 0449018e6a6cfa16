import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import { addMemberSchema, createTeamSchema, handoffSettingsSchema, listTeamsQuerySchema, teamSchema, updateAvailabilitySchema } from './teams.schemas.js';

const AVAILABLE_NOW =
  '`availableNow` is computed at request time: status `available`, the current local time (in the team’s `timezone`) inside a `weekly` window or no windows at all, and at least one member `available`.';

/**
 * API.md §8 Teams. Reads are not response-cached: `availableNow` depends on the clock, not only on
 * the stored rows.
 */
export function teamRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const teams = ctx.services.teams;
  const tags = ['teams'];
  const location = (id: string) => `/business/teams/${id}`;
  return async (app) => {
    app.post(
      '/business/teams',
      {
        config: { idempotent: true },
        schema: {
          tags,
          summary: 'Create a team',
          description:
            'Members start with role `member` and status `available`; the team with status `available`, time zone `UTC` and no weekly windows (always). ' +
            '`members` are people of the workspace: user ids or e-mails of its members (anyone else → 400 naming `members.<i>`), each once; they are stored and shown by their e-mail.',
          body: createTeamSchema,
          response: withErrors({ 201: teamSchema }),
        },
      },
      async (request, reply) => {
        const team = await teams.create(actorOf(request), request.body);
        return reply.code(201).header('location', location(team.id)).send(team);
      },
    );

    app.get(
      '/business/teams',
      {
        schema: {
          tags,
          summary: 'List teams, newest first',
          description: AVAILABLE_NOW,
          querystring: listTeamsQuerySchema,
          response: withErrors({ 200: pageOf(teamSchema) }),
        },
      },
      async (request) => teams.list(actorOf(request).workspaceId, request.query),
    );

    app.get(
      '/business/teams/:id',
      { schema: { tags, summary: 'Get a team', description: AVAILABLE_NOW, params: idParams, response: withErrors({ 200: teamSchema }, [404]) } },
      async (request) => teams.get(actorOf(request).workspaceId, request.params.id),
    );

    app.put(
      '/business/teams/:id/availability',
      {
        schema: {
          tags,
          summary: 'Update a team’s availability and its members’ statuses',
          description:
            'Fields left out stay as they are; `weekly` replaces the whole schedule. Windows are local to `timezone`, `start` inclusive and `end` exclusive, ' +
            '`end` may be `24:00`; a window crossing midnight is two windows. `members` sets the status of existing members (e-mails matched case-insensitively); ' +
            'an e-mail that is not a member is refused with 400 naming `members.<i>.email`.',
          params: idParams,
          body: updateAvailabilitySchema,
          response: withErrors({ 200: teamSchema }, [404]),
        },
      },
      async (request) => teams.updateAvailability(actorOf(request), request.params.id, request.body),
    );

    app.put(
      '/business/teams/:id/handoff',
      {
        schema: {
          tags,
          summary: 'Set how the team takes handoffs',
          description:
            '`offerSeconds`: how long a conversation offered to a member waits for them to accept before it goes to the next available member. `notify`: the team’s webhook for handoff events, signed with its secret (never shown again); null removes it. ' +
            '`desk`: where members work handoffs in Slack or Discord (a channel of the workspace and a conversation in it, or `dm`); each handoff’s card carries the conversation so far and an Accept button, and the accepting member’s replies in its thread reach the user. ' +
            '`chatUsers`: members’ user ids on that platform (an e-mail that is not a member → 400 naming `chatUsers.<i>.email`).',
          params: idParams,
          body: handoffSettingsSchema,
          response: withErrors({ 200: teamSchema }, [404]),
        },
      },
      async (request) => {
        const actor = actorOf(request);
        // What can be refused is checked first (the URL, the desk's channel, members): a refusal changes nothing.
        await ctx.services.handoffs.setTeamHandoff(actor, request.params.id, request.body);
        return teams.get(actor.workspaceId, request.params.id);
      },
    );

    app.post(
      '/business/teams/:id/members',
      {
        config: { idempotent: true },
        schema: {
          tags,
          summary: 'Add a member to a team',
          description:
            'A person of the workspace, by `email` or `userId` (anyone else → 400 naming the field); they start `available`. Someone already in the team → 409.',
          params: idParams,
          body: addMemberSchema,
          response: withErrors({ 201: teamSchema }, [404, 409]),
        },
      },
      async (request, reply) => {
        const team = await teams.addMember(actorOf(request), request.params.id, request.body);
        return reply.code(201).header('location', location(team.id)).send(team);
      },
    );
  };
}
