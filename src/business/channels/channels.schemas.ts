import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';

const secret = (what: string) => z.string().min(1).max(4096).describe(`${what} (write-only).`);

export const settingsSchema = z.strictObject({
  respondTo: z.enum(['mentions', 'all']).describe('`mentions`: only when the bot is mentioned (direct messages always); `all`: every message.'),
  replyInThread: z.boolean(),
  allowedConversations: z.array(z.string().min(1).max(200)).max(500).describe('Platform channel ids the bot listens in; empty = all.'),
  enabled: z.boolean(),
  streaming: z
    .boolean()
    .describe('Slack: stream answers natively (`chat.startStream` / `appendStream` / `stopStream`) where the workspace allows it; otherwise, or when Slack refuses, post then edit about once a second.'),
  feedbackButtons: z.boolean().describe('Slack and Discord: 👍/👎 feedback buttons under every answer; a click rates that answer (5 or 1), once per person.'),
  statusMessages: z
    .array(z.string().trim().min(1).max(100))
    .max(10)
    .describe('Slack: the loading messages the thread shows, rotating, while the answer is worked out (`assistant.threads.setStatus`); empty: “is thinking…”.'),
  suggestedPrompts: z
    .array(z.strictObject({ title: z.string().trim().min(1).max(75), message: z.string().trim().min(1).max(500) }))
    .max(4)
    .describe('Slack: the prompts a new assistant thread suggests (`assistant.threads.setSuggestedPrompts`); empty: made from the titles of the persona’s knowledge.'),
});

export const DEFAULT_SETTINGS: z.infer<typeof settingsSchema> = {
  respondTo: 'mentions',
  replyInThread: true,
  allowedConversations: [],
  enabled: true,
  streaming: true,
  feedbackButtons: true,
  statusMessages: [],
  suggestedPrompts: [],
};

/** A channel's stored settings with the defaults of fields added since it was created. */
export const settingsOf = (stored: string): z.infer<typeof settingsSchema> => ({ ...DEFAULT_SETTINGS, ...(JSON.parse(stored) as Partial<z.infer<typeof settingsSchema>>) });

export const slackCredentialsSchema = z.union([
  z.strictObject({ botToken: secret('xoxb- bot token'), signingSecret: secret('Events API signing secret') }),
  z.strictObject({ botToken: secret('xoxb- bot token'), appToken: secret('xapp- app-level token (Socket Mode)') }),
]);
export const discordCredentialsSchema = z.strictObject({ botToken: secret('Bot token') });
export const webhookCredentialsSchema = z.strictObject({
  secret: z.string().min(16).max(4096).describe('HMAC-SHA256 key of inbound (and outbound) signatures; at least 16 characters (write-only).'),
  outboundUrl: z.string().max(2048).optional().describe('Where `send` and replies are delivered, signed; passes the address guard.'),
});

export const createChannelSchema = z
  .strictObject({
    type: z.enum(['slack', 'discord', 'webhook']),
    name: z.string().trim().min(1).max(200),
    personaId: z.string().min(1).optional(),
    abTestId: z.string().min(1).optional(),
    credentials: z.record(z.string(), z.unknown()).describe('Slack `{ botToken, signingSecret }` (Events API) or `{ botToken, appToken }` (Socket Mode); Discord `{ botToken }`; webhook `{ secret, outboundUrl? }`. Write-only.'),
    settings: settingsSchema.partial().optional(),
  })
  .superRefine((body, ctx) => {
    if ((body.personaId === undefined) === (body.abTestId === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['personaId'], message: 'send exactly one of personaId and abTestId' });
    }
    const schema = body.type === 'slack' ? slackCredentialsSchema : body.type === 'discord' ? discordCredentialsSchema : webhookCredentialsSchema;
    const parsed = schema.safeParse(body.credentials);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', path: ['credentials', ...issue.path.map(String)], message: issue.message });
    }
  });

export const updateSettingsSchema = settingsSchema.partial().extend({
  personaId: z.string().min(1).optional().describe('Route to this persona instead (clears abTestId).'),
  abTestId: z.string().min(1).optional().describe('Route through this A/B test instead (clears personaId).'),
}).strict().refine((b) => !(b.personaId !== undefined && b.abTestId !== undefined), { path: ['abTestId'], message: 'send at most one of personaId and abTestId' });

export const sendSchema = z.strictObject({
  to: z.string().min(1).max(200).describe('Platform conversation: Slack channel id, Discord channel id, webhook conversationId.'),
  message: z.string().min(1).max(32_000),
  threadId: z.string().min(1).max(200).optional().describe('Slack thread ts / Discord message id to reply to.'),
  priority: z.enum(['low', 'normal', 'high']).default('normal').describe('`high` goes ahead of queued sends and is marked for the reader.'),
});

export const webhookInboundSchema = z.strictObject({
  conversationId: z.string().min(1).max(200),
  userId: z.string().min(1).max(200).optional(),
  message: z.string().min(1).max(32_000).refine((s) => s.trim() !== '', 'must not be blank'),
});

export const listChannelsQuerySchema = pageQuerySchema.extend({ type: z.enum(['slack', 'discord', 'webhook']).optional() }).strict();

export const channelSchema = z
  .object({
    id: z.string(),
    type: z.enum(['slack', 'discord', 'webhook']),
    name: z.string(),
    personaId: z.string().nullable(),
    abTestId: z.string().nullable(),
    status: z.enum(['connecting', 'connected', 'error', 'disabled']),
    statusDetail: z.string().nullable().describe('Why, in words, when `error` (e.g. "Slack rejected the bot token (invalid_auth)").'),
    settings: settingsSchema,
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Channel' });

export const sendResultSchema = z.object({
  id: z.string().describe('This send (msg_…).'),
  channelId: z.string(),
  externalId: z.string().describe('The platform’s message id (Slack ts, Discord message id; webhook: this id).'),
  status: z.literal('sent'),
});

export const webhookReplySchema = z.object({
  sessionId: z.string(),
  messageId: z.string(),
  reply: z.string().describe('The answer; empty while a person of the persona’s team has the conversation (see `handoff`).'),
  handoff: z
    .object({ id: z.string(), status: z.enum(['queued', 'offered', 'accepted', 'resolved', 'returned']), member: z.string().nullable() })
    .optional()
    .describe('Present when the conversation is with (or going to) a person: the persona did not answer.'),
});

export type ChannelSettings = z.infer<typeof settingsSchema>;
export type CreateChannelInput = z.infer<typeof createChannelSchema>;
export type UpdateSettingsInput = z.infer<typeof updateSettingsSchema>;
export type SendInput = z.infer<typeof sendSchema>;
export type Channel = z.infer<typeof channelSchema>;
export type SendResult = z.infer<typeof sendResultSchema>;
