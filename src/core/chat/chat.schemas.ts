import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';

export const MESSAGE_MAX = 32_000;
const id = z.string().min(1);
const message = z
  .string()
  .min(1)
  .max(MESSAGE_MAX)
  .refine((s) => s.trim() !== '', 'must not be blank');

/** Per-answer overrides of the persona's model settings (API.md §5). */
const overrides = {
  model: z.string().trim().min(1).max(200).optional().describe("Model for this answer; default the persona's."),
  temperature: z.number().min(0).max(2).optional(),
  maxTokens: z.number().int().min(1).max(32_000).optional(),
};

const metadata = z
  .record(z.string(), z.unknown())
  .refine((m) => JSON.stringify(m).length <= 16_384, 'must be at most 16 KiB as JSON')
  .optional()
  .describe('Free-form object kept with the interaction record (16 KiB at most).');

export const querySchema = z
  .strictObject({
    personaId: id.optional(),
    abTestId: id.optional().describe('A running A/B test: it picks the persona (sticky per userId, else per session).'),
    message,
    sessionId: id.optional().describe('Continue this session; omitted: a new one.'),
    userId: z.string().min(1).max(200).optional().describe("The caller's end-user id."),
    enableMCPTools: z.boolean().default(false),
    ...overrides,
    metadata,
  })
  .superRefine((body, ctx) => {
    if (body.abTestId !== undefined && body.personaId !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['abTestId'], message: 'send exactly one of personaId and abTestId' });
    } else if (body.abTestId === undefined && body.personaId === undefined) {
      ctx.addIssue({ code: 'custom', path: ['personaId'], message: 'is required (exactly one of personaId and abTestId)' });
    }
  });

export const sourceRefSchema = z.object({ chunkId: z.string(), sourceId: z.string(), sourceName: z.string(), score: z.number() });
export const usageSchema = z.object({ promptTokens: z.number().int(), completionTokens: z.number().int() });

export const answerSchema = z
  .object({
    sessionId: z.string(),
    messageId: z.string().describe("The answer's message."),
    personaId: z.string(),
    abTestId: z.string().nullable(),
    variant: z.enum(['A', 'B']).nullable(),
    response: z.string(),
    sources: z.array(sourceRefSchema),
    toolCalls: z.array(z.object({ id: z.string(), name: z.string(), arguments: z.unknown(), result: z.unknown() })),
    usage: usageSchema,
    latencyMs: z.number().int(),
    handoff: z
      .object({
        id: z.string(),
        status: z.enum(['queued', 'offered', 'accepted', 'resolved', 'returned']),
        member: z.string().nullable(),
        messages: z
          .array(z.object({ id: z.string(), content: z.string(), author: z.string().describe('`human:<email>` (a person) or `system` (a notice).'), createdAt: z.string() }))
          .optional()
          .describe('What a person (and notices) said since the user’s previous message, not yet returned to this client, whether or not they have handed back since; `response` begins with their text.'),
      })
      .optional()
      .describe(
        'Present when a person of the persona’s team has (or is about to take) the conversation: the persona did not answer. `response` is then the notice the user was shown, or what the person said since the user’s previous message (empty when nothing yet: it arrives on GET /sessions/:id/events, or with the next message); on a channel it is empty, the person’s messages reaching the user there. `messageId` is the stored message. ' +
          'Also present, `returned` or `resolved`, when a person ended the handoff since the user’s previous message: `messages` holds what they said meanwhile (their last reply, the notice that they left), and `response` is that text, a blank line, then the persona’s answer.',
      ),
  })
  .meta({ id: 'Answer' });

export const sessionSchema = z
  .object({
    id: z.string(),
    personaId: z.string(),
    abTestId: z.string().nullable(),
    variant: z.enum(['A', 'B']).nullable(),
    channelId: z.string().nullable(),
    userId: z.string().nullable(),
    title: z.string(),
    messageCount: z.number().int(),
    createdAt: z.string(),
    lastMessageAt: z.string(),
  })
  .meta({ id: 'Session' });

export const storedMessageSchema = z.object({
  id: z.string(),
  role: z.enum(['user', 'assistant', 'tool']),
  content: z.string(),
  toolCalls: z
    .array(z.object({ id: z.string(), name: z.string(), arguments: z.unknown(), result: z.unknown(), isError: z.boolean() }))
    .optional()
    .describe('On an answer that called tools: the calls and their results.'),
  toolCallId: z.string().optional().describe('On a tool message: the call it answers.'),
  author: z
    .string()
    .optional()
    .describe('On an assistant message not written by the persona: `human:<email>` (a person of its team, after a handoff) or `system` (a notice, e.g. a person joined).'),
  createdAt: z.string(),
});

export const sessionDetailSchema = sessionSchema.extend({ messages: z.array(storedMessageSchema) }).meta({ id: 'SessionWithMessages' });

export const listSessionsQuerySchema = pageQuerySchema
  .extend({ personaId: z.string().optional(), channelId: z.string().optional(), userId: z.string().max(200).optional() })
  .strict();

export const feedbackSchema = z.strictObject({
  rating: z.number().int().min(1).max(5),
  messageId: id.optional().describe("The answer rated; default the session's latest."),
  comment: z.string().max(4_000).optional(),
});

export const feedbackResultSchema = z.object({
  sessionId: z.string(),
  messageId: z.string().nullable(),
  rating: z.number().int(),
  comment: z.string().nullable(),
  createdAt: z.string(),
});

/** A message as AI SDK clients send it: `content`, or UI `parts` (only text parts are read). */
const chatMessageSchema = z
  .strictObject({
    id: z.string().max(200).optional(),
    role: z.enum(['user', 'assistant', 'system']),
    content: z.string().max(MESSAGE_MAX).optional(),
    parts: z.array(z.looseObject({ type: z.string(), text: z.string().max(MESSAGE_MAX).optional() })).max(1_000).optional(),
    metadata: z.unknown().optional(),
  })
  .refine((m) => m.content !== undefined || m.parts !== undefined, { message: 'needs content or parts', path: ['content'] });

export const chatBodySchema = z
  .strictObject({
    messages: z.array(chatMessageSchema).min(1).max(1_000),
    enableMCPTools: z.boolean().default(false),
    stream: z.boolean().default(true),
    sessionId: id.optional(),
    userId: z.string().min(1).max(200).optional(),
    // What AI SDK's DefaultChatTransport adds to every request.
    id: z.string().max(200).optional(),
    trigger: z.string().max(100).optional(),
    messageId: z.string().max(200).optional(),
  })
  .describe('AI SDK UI requests (messages with `parts`) are answered in the UI message stream protocol.');

export const chatQuerySchema = z.strictObject({
  protocol: z.enum(['native', 'ui-message-stream']).optional().describe('Force the AI SDK UI message stream.'),
});

const booleanText = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

export const chatGetQuerySchema = z.strictObject({
  message,
  sessionId: id.optional(),
  userId: z.string().min(1).max(200).optional(),
  enableMCPTools: booleanText.default(false),
  protocol: z.enum(['native', 'ui-message-stream']).optional(),
});

export type QueryInput = z.infer<typeof querySchema>;
export type ChatBody = z.infer<typeof chatBodySchema>;
/** Why the model stopped: `length` when it reached the token limit (`maxTokens`), else `stop`. */
export type FinishReason = 'stop' | 'length';
/**
 * An answer as the chat service returns it. `finishReason` is not part of `POST /query`'s JSON
 * (API.md §5; the response schema leaves it out): the OpenAI-compatible and AI SDK encoders report it.
 */
export type Answer = z.infer<typeof answerSchema> & { finishReason: FinishReason };
export type Session = z.infer<typeof sessionSchema>;
export type SessionDetail = z.infer<typeof sessionDetailSchema>;
export type FeedbackInput = z.infer<typeof feedbackSchema>;
export type FeedbackResult = z.infer<typeof feedbackResultSchema>;
