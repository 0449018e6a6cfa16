import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { ASKS, streamExchange } from '../chat/chat.routes.js';
import { disconnectSignal } from '../chat/sse.js';
import { completionChunkEncoder, switchboardOf, usageOf } from './openai.encoder.js';
import { openAiErrorHandler, openAiNotFound } from './openai.errors.js';
import { type Completion, completionBodySchema, completionSchema, modelListSchema, modelParams, modelSchema, openAiErrorSchema } from './openai.schemas.js';

export const SESSION_HEADER = 'x-switchboard-session-id';

const ERRORS: Record<number, string> = {
  400: 'invalid_request_error: a bad body; `param` names the field, `code` says why (unknown_parameter, unsupported_parameter, unsupported_value, invalid_value).',
  401: '`invalid_api_key`: missing, unknown, revoked or expired key.',
  403: '`insufficient_permissions`: the key lacks the scope.',
  404: '`model_not_found` (or `not_found` for a session header).',
  409: 'A/B test not running, or a session of another persona.',
  429: '`rate_limit_exceeded`; see `Retry-After`.',
  500: '`api_error`.',
  502: '`api_error`: the model failed.',
  504: '`api_error`: the model timed out.',
};

/** A /v1 route's responses: its success plus OpenAI-shaped errors, so the OpenAPI document lists them. */
function withOpenAiErrors<T extends Record<number, unknown>>(success: T, codes: number[]): T {
  const errors: Record<number, unknown> = {};
  for (const code of codes) errors[code] = { description: ERRORS[code] ?? 'Error', content: { 'application/json': { schema: openAiErrorSchema } } };
  return { ...errors, ...success } as T;
}

const COMMON = [400, 401, 403, 429, 500];

/**
 * Issue 16: personas and running A/B tests as models of an OpenAI-compatible API under /v1 (the
 * bearer key is the "OpenAI API key"). Every error here, the auth hooks' included, answers in
 * OpenAI's shape; the conversation logic is the chat service's.
 */
export function openAiRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const service = ctx.services.openai;
  const tags = ['openai'];
  return async (app) => {
    app.setErrorHandler(openAiErrorHandler);
    app.setNotFoundHandler(openAiNotFound);

    app.get(
      '/models',
      { schema: { tags, summary: 'List models: the personas and running A/B tests (OpenAI)', response: withOpenAiErrors({ 200: modelListSchema }, COMMON) } },
      async (request) => ({ object: 'list' as const, data: await service.listModels(actorOf(request).workspaceId) }),
    );

    app.get(
      '/models/:id',
      { schema: { tags, summary: 'One model (OpenAI)', params: modelParams, response: withOpenAiErrors({ 200: modelSchema }, [...COMMON, 404]) } },
      async (request) => service.getModel(actorOf(request).workspaceId, request.params.id),
    );

    app.post(
      '/chat/completions',
      {
        // Asking a persona: an `agent` may (API.md §14).
        config: { role: ASKS },
        schema: {
          tags,
          summary: 'Chat with a persona or an A/B test (OpenAI Chat Completions)',
          description:
            '`model` is a persona id or a running A/B test id. With `stream: true` an event stream of `chat.completion.chunk` objects ending with `data: [DONE]`. ' +
            `The session is \`${SESSION_HEADER}\` when sent, else the one whose recorded turns equal the request's earlier turns; the response names it in the same header.`,
          headers: z.looseObject({ [SESSION_HEADER]: z.string().optional().describe('Continue this session.') }),
          body: completionBodySchema,
          response: withOpenAiErrors({ 200: completionSchema.or(z.string()).describe('A chat.completion, or an event stream (stream: true)') }, [...COMMON, 404, 409, 502, 504]),
        },
      },
      async (request, reply) => {
        const body = request.body;
        const created = Math.floor(ctx.clock.now().getTime() / 1000);
        const header = request.headers[SESSION_HEADER];
        const { exchange, run } = await service.open(actorOf(request).workspaceId, body, typeof header === 'string' && header !== '' ? header : undefined);
        const id = `chatcmpl-${exchange.messageId}`;
        if (body.stream) {
          const encoder = completionChunkEncoder({ id, model: body.model, created, includeUsage: body.stream_options?.include_usage === true, sessionId: exchange.sessionId });
          await streamExchange(request, reply, { ...exchange, run }, encoder);
          return;
        }
        reply.header(SESSION_HEADER, exchange.sessionId);
        const answer = await run(() => {}, disconnectSignal(reply), { streamed: false });
        const completion: Completion = {
          id,
          object: 'chat.completion',
          created,
          model: body.model,
          choices: [{ index: 0, message: { role: 'assistant', content: answer.response, refusal: null }, logprobs: null, finish_reason: answer.finishReason }],
          usage: usageOf(answer),
          switchboard: switchboardOf(answer),
        };
        return completion;
      },
    );
  };
}
