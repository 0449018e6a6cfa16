import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod, ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { idParams, pageOf, withErrors } from '../../http/openapi.js';
import {
  channelSchema,
  createChannelSchema,
  listChannelsQuerySchema,
  sendResultSchema,
  sendSchema,
  updateSettingsSchema,
  webhookReplySchema,
} from './channels.schemas.js';

/** The raw request a bridge or the webhook check needs: signatures cover the exact bytes. */
const raw = (request: FastifyRequest) => ({ rawBody: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0), headers: request.headers });

/** API.md §9: channels. Inbound routes are public: the platform's signature authenticates them. */
export function channelRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const channels = ctx.services.channels;
  const tags = ['channels'];
  return async (app) => {
    app.post(
      '/business/channels',
      {
        config: { scope: 'admin', idempotent: true },
        schema: {
          tags,
          summary: 'Connect a Slack, Discord or webhook channel',
          description:
            'Answers 201 once the first connection attempt settles (a few seconds at most): refused credentials still register the channel, with `status: "error"` and the reason. Credentials are write-only.',
          body: createChannelSchema,
          response: withErrors({ 201: channelSchema }, [404]),
        },
      },
      async (request, reply) => {
        const channel = await channels.create(actorOf(request), request.body);
        return reply.code(201).header('location', `/business/channels/${channel.id}`).send(channel);
      },
    );

    app.get(
      '/business/channels',
      { schema: { tags, summary: 'List channels, newest first (never credentials)', querystring: listChannelsQuerySchema, response: withErrors({ 200: pageOf(channelSchema) }) } },
      async (request) => {
        const { type, ...page } = request.query;
        return channels.list(actorOf(request).workspaceId, page, type);
      },
    );

    app.get(
      '/business/channels/:id',
      { schema: { tags, summary: 'Get a channel', params: idParams, response: withErrors({ 200: channelSchema }, [404]) } },
      async (request) => channels.get(actorOf(request).workspaceId, request.params.id),
    );

    app.put(
      '/business/channels/:id/settings',
      {
        schema: {
          tags,
          summary: 'Change settings, persona or A/B test; applied without a restart',
          params: idParams,
          body: updateSettingsSchema,
          response: withErrors({ 200: channelSchema }, [404]),
        },
      },
      async (request) => channels.updateSettings(actorOf(request), request.params.id, request.body),
    );

    app.post(
      '/business/channels/:id/send',
      {
        schema: {
          tags,
          summary: 'Post a message to a conversation of the channel',
          params: idParams,
          body: sendSchema,
          response: withErrors({ 202: sendResultSchema }, [404, 409, 502]),
        },
      },
      async (request, reply) => reply.code(202).send(await channels.send(actorOf(request).workspaceId, request.params.id, request.body, undefined, undefined, actorOf(request))),
    );

    await app.register(async (plugin) => {
      const inbound = plugin.withTypeProvider<ZodTypeProvider>();
      // The exact bytes, for the signature: no JSON parsing before it is checked.
      inbound.removeAllContentTypeParsers();
      inbound.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
      inbound.addHook('onRoute', (route) => {
        route.config = { ...(route.config ?? {}), public: true };
      });
      const rawBody = z.unknown().describe('The raw body; its signature is checked before anything is read.');

      inbound.post(
        '/business/channels/:id/slack/events',
        {
          schema: {
            tags,
            summary: 'Slack Events API deliveries (signed by Slack)',
            security: [],
            description:
              '`X-Slack-Signature` and `X-Slack-Request-Timestamp` are verified (bad or older than 5 minutes → 401); `url_verification` is answered with its challenge; every delivery is acknowledged at once and answered after. ' +
              'A signed body that is no Slack delivery (not JSON → `invalid_json`; not an object with a `type`, an `event_callback` whose `event` is not an object with a `type`, nested deeper than 64 levels → `validation_failed` naming the field) is a 400; a well-formed delivery the channel does not listen to is acknowledged (200). ' +
              'Button clicks (a form with a JSON `payload`) and the `/human` slash command (a form with `command`, `text`, `user_id`, `channel_id`, `team_id`, `trigger_id`, `response_url`; one missing → 400 naming it) arrive here too. ' +
              'A channel whose bridge is stopped → 503.',
            params: idParams,
            body: rawBody,
            response: withErrors({ 200: z.unknown() }, [400, 401, 404, 409, 503], { public: true }),
          },
        },
        async (request, reply) => {
          const answer = await channels.slackEvents(request.params.id, raw(request));
          // The receiver's body is already what Slack expects: sent as is, not serialized again.
          return reply.code(answer.status as 200).headers(answer.headers ?? {}).serializer((body) => body as string).send(answer.body);
        },
      );

      inbound.post(
        '/business/channels/:id/inbound',
        {
          schema: {
            tags,
            summary: 'A webhook message, answered synchronously',
            security: [],
            description:
              'Body `{ conversationId, userId?, message }`, header `X-Switchboard-Signature: sha256=<hex HMAC-SHA256 of the raw body under the channel secret>` (wrong or missing → 401). ' +
              'An optional `X-Switchboard-Delivery` id makes a retried delivery answer 409 instead of twice. A disabled channel → 409.',
            params: idParams,
            body: rawBody,
            response: withErrors({ 200: webhookReplySchema }, [400, 401, 404, 409, 502, 504], { public: true }),
          },
        },
        async (request) => channels.webhookInbound(request.params.id, raw(request)),
      );
    });
  };
}
