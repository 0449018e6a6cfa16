/**
 * OpenAI's Chat Completions and Models wire shapes (snake_case, as OpenAI clients send and read
 * them). What a request may carry: fields Switchboard uses, fields it accepts and ignores (sampling
 * hints that change nothing a client relies on), and fields it refuses with a 400 naming them.
 */
import { z } from 'zod';
import { MESSAGE_MAX } from '../chat/chat.schemas.js';

/** Prefix of a refused field's message: the /v1 error mapping reads it as `unsupported_parameter`. */
export const UNSUPPORTED_PARAMETER = 'is not supported';
/** Prefix of a refused value's message: read as `unsupported_value`. */
export const UNSUPPORTED_VALUE = 'unsupported value';

const TOOLS_HINT =
  "Switchboard runs the persona's own server-side tools (send enable_mcp_tools: true); client-defined tools and functions are not accepted";

/** A content part; only `{ type: "text", text }` is accepted (checked below, so the error names the part). */
const partSchema = z.looseObject({ type: z.string(), text: z.string().max(MESSAGE_MAX).optional() });

const messageSchema = z
  .looseObject({
    role: z.string(),
    content: z.union([z.string().max(MESSAGE_MAX), z.array(partSchema).max(100)]).nullable().optional(),
    // Accepted and ignored: a participant name, an earlier refusal.
    name: z.string().max(200).optional(),
    refusal: z.string().nullable().optional(),
  })
  .describe('Roles: system, developer, user, assistant. Content: a string or `{ type: "text", text }` parts.');

const ROLES = new Set(['system', 'developer', 'user', 'assistant']);
const OFF = z.unknown().optional();

export const completionBodySchema = z
  .strictObject({
    model: z.string().min(1).max(200).describe('A persona id or a running A/B test id (GET /v1/models).'),
    messages: z.array(messageSchema).min(1).max(1_000),
    stream: z.boolean().nullable().optional(),
    stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullable().optional(),
    temperature: z.number().min(0).max(2).nullable().optional(),
    max_tokens: z.number().int().min(1).max(32_000).nullable().optional(),
    max_completion_tokens: z.number().int().min(1).max(32_000).nullable().optional(),
    user: z.string().max(200).optional().describe('The end user: keys sticky A/B assignment and analytics.'),
    metadata: z
      .record(z.string(), z.unknown())
      .refine((m) => JSON.stringify(m).length <= 16_384, 'must be at most 16 KiB as JSON')
      .nullable()
      .optional(),
    n: z.number().int().min(1).nullable().optional(),
    enable_mcp_tools: z.boolean().optional().describe("Switchboard: let the persona use its own server-side tools, as `enableMCPTools` in POST /query."),
    // Accepted and ignored.
    top_p: z.number().nullable().optional(),
    presence_penalty: z.number().nullable().optional(),
    frequency_penalty: z.number().nullable().optional(),
    seed: z.number().int().nullable().optional(),
    stop: z.union([z.string(), z.array(z.string())]).nullable().optional(),
    logit_bias: z.record(z.string(), z.number()).nullable().optional(),
    parallel_tool_calls: z.boolean().nullable().optional(),
    store: z.boolean().nullable().optional(),
    service_tier: z.string().nullable().optional(),
    reasoning_effort: z.string().nullable().optional(),
    verbosity: z.string().nullable().optional(),
    prompt_cache_key: z.string().nullable().optional(),
    safety_identifier: z.string().nullable().optional(),
    // Accepted only with their neutral value.
    logprobs: z.boolean().nullable().optional(),
    top_logprobs: z.number().int().nullable().optional(),
    response_format: z.looseObject({ type: z.string() }).nullable().optional(),
    modalities: z.array(z.string()).nullable().optional(),
    tool_choice: OFF,
    function_call: OFF,
    // Refused.
    tools: OFF,
    functions: OFF,
    audio: OFF,
    prediction: OFF,
    web_search_options: OFF,
  })
  .superRefine((body, ctx) => {
    const refuse = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message });
    for (const field of ['tools', 'functions'] as const) {
      const v = body[field];
      if (v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0)) refuse([field], `${UNSUPPORTED_PARAMETER}: ${TOOLS_HINT}`);
    }
    for (const field of ['tool_choice', 'function_call'] as const) {
      const v = body[field];
      if (v !== undefined && v !== null && v !== 'none' && v !== 'auto') refuse([field], `${UNSUPPORTED_PARAMETER}: ${TOOLS_HINT}`);
    }
    if (body.audio != null) refuse(['audio'], `${UNSUPPORTED_PARAMETER}: answers are text only`);
    if (body.prediction != null) refuse(['prediction'], `${UNSUPPORTED_PARAMETER}: predicted outputs are not available`);
    if (body.web_search_options != null) refuse(['web_search_options'], `${UNSUPPORTED_PARAMETER}: the persona's knowledge is the search`);
    if (body.n != null && body.n !== 1) refuse(['n'], `${UNSUPPORTED_VALUE}: only n = 1 (one answer per request) is supported`);
    if (body.logprobs === true) refuse(['logprobs'], `${UNSUPPORTED_VALUE}: log probabilities are not available`);
    if (body.top_logprobs != null && body.top_logprobs !== 0) refuse(['top_logprobs'], `${UNSUPPORTED_VALUE}: log probabilities are not available`);
    if (body.response_format != null && body.response_format.type !== 'text') {
      refuse(['response_format', 'type'], `${UNSUPPORTED_VALUE}: only "text" is supported (structured outputs are not)`);
    }
    if (body.modalities != null && body.modalities.some((m) => m !== 'text')) refuse(['modalities'], `${UNSUPPORTED_VALUE}: answers are text only`);
    body.messages.forEach((m, i) => {
      if (!ROLES.has(m.role)) {
        refuse(['messages', i, 'role'], `${UNSUPPORTED_VALUE}: roles are system, developer, user and assistant (client-side tool messages are not supported)`);
      }
      for (const field of ['tool_calls', 'function_call', 'audio'] as const) {
        if (m[field] != null) refuse(['messages', i, field], `${UNSUPPORTED_PARAMETER}: client-side tools and audio are not accepted`);
      }
      if (Array.isArray(m.content)) {
        m.content.forEach((p, j) => {
          if (p.type !== 'text') refuse(['messages', i, 'content', j, 'type'], `${UNSUPPORTED_VALUE}: only text parts ({ "type": "text", "text": ... }) are supported; images, audio and files are not`);
          else if (typeof p.text !== 'string') refuse(['messages', i, 'content', j, 'text'], 'a text part needs text');
        });
      }
    });
  });

export type CompletionBody = z.infer<typeof completionBodySchema>;
export type CompletionMessage = CompletionBody['messages'][number];

export const modelSchema = z
  .object({
    id: z.string().describe('A persona id or a running A/B test id.'),
    object: z.literal('model'),
    created: z.number().int().describe('Epoch seconds.'),
    owned_by: z.string(),
    name: z.string().describe('Switchboard: the persona or A/B test name (Open WebUI shows it).'),
  })
  .meta({ id: 'OpenAiModel' });

export const modelListSchema = z.object({ object: z.literal('list'), data: z.array(modelSchema) });

const switchboardSchema = z
  .object({
    session_id: z.string(),
    message_id: z.string(),
    persona_id: z.string(),
    ab_test_id: z.string().nullable(),
    variant: z.enum(['A', 'B']).nullable(),
    sources: z.array(z.object({ chunk_id: z.string(), source_id: z.string(), source_name: z.string(), score: z.number() })),
  })
  .describe('Switchboard extras; OpenAI clients ignore them.');

export const completionSchema = z
  .object({
    id: z.string().describe('`chatcmpl-` + the message id of the stored answer (feedback takes that id).'),
    object: z.literal('chat.completion'),
    created: z.number().int(),
    model: z.string(),
    choices: z.array(
      z.object({
        index: z.number().int(),
        message: z.object({ role: z.literal('assistant'), content: z.string(), refusal: z.null() }),
        logprobs: z.null(),
        finish_reason: z.enum(['stop', 'length']).describe('`length` when the answer stopped at `max_completion_tokens` / `max_tokens`.'),
      }),
    ),
    usage: z.object({ prompt_tokens: z.number().int(), completion_tokens: z.number().int(), total_tokens: z.number().int() }),
    switchboard: switchboardSchema,
  })
  .meta({ id: 'ChatCompletion' });

export type Completion = z.infer<typeof completionSchema>;
export type OpenAiModel = z.infer<typeof modelSchema>;

/** OpenAI's error body. */
export const openAiErrorSchema = z
  .object({ error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }) })
  .meta({ id: 'OpenAiError' });

export const modelParams = z.strictObject({ id: z.string() });
