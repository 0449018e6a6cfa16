import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import { invitationUrl } from './invitations.service.js';
import {
  acceptInvitationSchema,
  changeRoleSchema,
  createdInvitationSchema,
  invitationSchema,
  inviteSchema,
  listQuerySchema,
  memberParams,
  memberSchema,
} from './members.schemas.js';
import { setSessionCookie } from './people.http.js';
import { signedInSchema } from './people.schemas.js';

/**
 * API.md §14, members and invitations: `admin` and up (the services decide what only an owner may
 * do); accepting an invitation is public (the token is the credential). `base()` is the public URL.
 */
export function membersRoutes(ctx: AppContext, base: () => string): FastifyPluginAsyncZod {
  const { members, invitations } = ctx.services;
  const tags = ['members'];
  return async (app) => {
    app.get(
      '/members',
      {
        config: { role: 'admin' },
        schema: {
          tags,
          summary: "The workspace's members with their roles, newest first",
          querystring: listQuerySchema,
          response: withErrors({ 200: pageOf(memberSchema) }),
        },
      },
      async (request) => members.list(actorOf(request), request.query),
    );

    app.put(
      '/members/:userId',
      {
        config: { role: 'admin' },
        schema: {
          tags,
          summary: "Change a member's role",
          description:
            'Only an owner grants `owner` or changes an owner\'s role (else 403). Demoting the last owner → 409. ' +
            "A lower role revokes at once the member's keys holding a scope above it (and the OAuth grants on them); their sign-in sessions continue with the new role.",
          params: memberParams,
          body: changeRoleSchema,
          response: withErrors({ 200: memberSchema }, [404, 409]),
        },
      },
      async (request) => members.changeRole(actorOf(request), request.params.userId, request.body.role),
    );

    app.delete(
      '/members/:userId',
      {
        config: { role: 'admin' },
        schema: {
          tags,
          summary: 'Remove a member',
          description:
            "Ends at once the member's keys, sign-in sessions and OAuth grants in this workspace. Only an owner removes an owner (else 403); removing the last owner → 409.",
          params: memberParams,
          response: withErrors({ 204: z.undefined().describe('Removed') }, [404, 409]),
        },
      },
      async (request, reply) => {
        await members.remove(actorOf(request), request.params.userId);
        return reply.code(204).send();
      },
    );

    app.post(
      '/members/invitations',
      {
        config: { role: 'admin', idempotent: true },
        schema: {
          tags,
          summary: 'Invite someone by e-mail with a role (a one-use link, 7 days)',
          description: 'An admin invites up to `admin`; only an owner invites an owner (else 403). An e-mail that is already a member → 409.',
          body: inviteSchema,
          response: withErrors({ 201: createdInvitationSchema }, [409]),
        },
      },
      async (request, reply) => {
        const { invitation, token } = await invitations.invite(actorOf(request), request.body);
        return reply
          .code(201)
          .header('location', `/members/invitations/${invitation.id}`)
          .header('cache-control', 'no-store')
          .send({ invitation, url: invitationUrl(base(), token) });
      },
    );

    app.get(
      '/members/invitations',
      {
        config: { role: 'admin' },
        schema: {
          tags,
          summary: 'Pending invitations, newest first (never their links)',
          querystring: listQuerySchema,
          response: withErrors({ 200: pageOf(invitationSchema) }),
        },
      },
      async (request) => invitations.listPending(actorOf(request), request.query),
    );

    app.delete(
      '/members/invitations/:id',
      {
        config: { role: 'admin' },
        schema: {
          tags,
          summary: 'Revoke a pending invitation',
          description: 'Its link answers 410 from then on. Used or revoked already → 409.',
          params: idParams,
          response: withErrors({ 204: z.undefined().describe('Revoked') }, [404, 409]),
        },
      },
      async (request, reply) => {
        await invitations.revoke(actorOf(request), request.params.id);
        return reply.code(204).send();
      },
    );

    app.post(
      '/auth/invitations/accept',
      {
        config: { public: true },
        schema: {
          tags,
          summary: 'Accept an invitation: join the workspace and sign in',
          description:
            'A new e-mail becomes a user with `name` and `password` (at least 12 characters); an existing user gives their own password (wrong → 401) and joins. ' +
            'Answers as `POST /auth/sessions`, with the `sb_session` cookie. A used, expired, revoked or unknown token → 410 `gone`; already a member → 409.',
          security: [],
          body: acceptInvitationSchema,
          response: withErrors({ 201: signedInSchema }, [400, 401, 409, 410], { public: true }),
        },
      },
      async (request, reply) => {
        const ua = request.headers['user-agent'];
        const origin = { requestId: request.id, ip: request.ip, userAgent: typeof ua === 'string' ? ua.slice(0, 300) : null };
        const { user, started } = await invitations.accept(request.body, origin);
        setSessionCookie(reply, ctx.config, started);
        return reply.code(201).send(await ctx.services.loginSessions.signedInBody(user, started.csrfToken));
      },
    );
  };
}
