import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { ValidationError } from '../../errors.js';
import { actorOf } from '../../http/auth-hooks.js';
import { toAppError } from '../../http/error-handler.js';
import { withErrors } from '../../http/openapi.js';
import type { ChatMessage } from '../../llm/llm-client.js';
import { answerSchema, type ChatBody, chatBodySchema, chatGetQuerySchema, chatQuerySchema, MESSAGE_MAX, querySchema } from './chat.schemas.js';
import type { Exchange, ExchangeRequest } from './chat.service.js';
import { nativeEncoder, type StreamEncoder, uiMessageEncoder } from './encoders.js';
import { disconnectSignal, openSse } from './sse.js';

const eventStream = {
  description: 'Server-Sent Events: the chunks of API.md §6 (`text`, `tool_call`, `tool_result`, `done`, `error`), then `[DONE]`.',
  content: { 'text/event-stream': { schema: z.string().describe('SSE events; each `data` is one JSON chunk') } },
};

/** Streams one exchange through an encoder; failures after the start become an `error` event. */
export async function streamExchange(request: FastifyRequest, reply: FastifyReply, exchange: Exchange, encoder: StreamEncoder) {
  const sse = openSse(reply, encoder.headers);
  const start = encoder.start();
  if (start) await sse.write(start);
  try {
    const answer = await exchange.run((event) => sse.write(encoder.event(event)), sse.signal);
    await sse.write(encoder.done(answer));
  } catch (err) {
    if (sse.signal.aborted) {
      request.log.info({ sessionId: exchange.sessionId }, 'client disconnected; the model call was cancelled');
      sse.end();
      return;
    }
    const appError = toAppError(err as FastifyError, request);
    if (appError.status >= 500) request.log.warn({ code: appError.code, detail: appError.message }, 'answer failed');
    await sse.write(encoder.error({ code: appError.code, message: appError.message }));
  }
  await sse.write(encoder.end());
  sse.end();
}

function textOf(message: ChatBody['messages'][number]): string {
  if (message.content !== undefined) return message.content;
  return (message.parts ?? [])
    .filter((p) => p.type === 'text' && typeof p.text === 'string')
    .map((p) => p.text)
    .join('');
}

/** The stateless conversation of a chat request: earlier turns, the caller's system messages, the question. */
function conversationOf(body: ChatBody) {
  const last = body.messages[body.messages.length - 1]!;
  const at = `messages.${body.messages.length - 1}`;
  if (last.role !== 'user') throw ValidationError.field(`${at}.role`, 'the last message must be the user’s');
  const message = textOf(last);
  if (message.trim() === '') throw ValidationError.field(`${at}.content`, 'must not be blank');
  if (message.length > MESSAGE_MAX) throw ValidationError.field(`${at}.content`, `must be at most ${MESSAGE_MAX} characters`);
  const history: ChatMessage[] = [];
  const callerInstructions: string[] = [];
  for (const m of body.messages.slice(0, -1)) {
    const text = textOf(m);
    if (m.role === 'system') callerInstructions.push(text);
    else if (text !== '') history.push({ role: m.role, content: text });
  }
  return { message, history, callerInstructions };
}

/** The chat route's `agentId`: a persona, or an A/B test (`abt_…`) that picks one. */
function agentOf(agentId: string): Pick<ExchangeRequest, 'personaId' | 'abTestId'> {
  return agentId.startsWith('abt_') ? { abTestId: agentId } : { personaId: agentId };
}

/**
 * Asking a persona needs the `agent` role (API.md §14): a person who works handoffs asks too, with
 * no write scope. Keys keep their meaning: a read-only key (viewer) is refused, a write key allowed.
 */
export const ASKS = 'agent' as const;

/** API.md §5 (queries) and §6 (streaming chat). */
export function chatRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const chat = ctx.services.chat;
  const tags = ['chat'];
  return async (app) => {
    app.post(
      '/query',
      {
        config: { idempotent: true, role: ASKS },
        schema: { tags, summary: 'Ask a persona; the whole answer as JSON', body: querySchema, response: withErrors({ 200: answerSchema }, [404, 409, 502, 504]) },
      },
      async (request, reply) => {
        return chat.query(actorOf(request).workspaceId, request.body, disconnectSignal(reply));
      },
    );

    app.post(
      '/query/stream',
      {
        config: { role: ASKS },
        schema: {
          tags,
          summary: 'Ask a persona; the answer as an event stream',
          body: querySchema,
          response: withErrors({ 200: eventStream }, [404, 409]),
        },
      },
      async (request, reply) => {
        const exchange = await chat.open(actorOf(request).workspaceId, request.body);
        await streamExchange(request, reply, exchange, nativeEncoder());
      },
    );

    const chatParams = z.strictObject({ agentId: z.string().describe('A persona id, or a running A/B test id (`abt_…`) that picks the persona.') });

    app.post(
      '/api/ai-sdk/agents/:agentId/chat',
      {
        config: { role: ASKS },
        schema: {
          tags,
          summary: 'Chat with a persona (AI SDK compatible)',
          description:
            'With `stream: true` (default) an event stream: API.md §6 chunks, or the AI SDK UI message stream when the messages carry `parts` or `?protocol=ui-message-stream`. With `stream: false` the JSON of POST /query.',
          params: chatParams,
          querystring: chatQuerySchema,
          body: chatBodySchema,
          response: withErrors({ 200: answerSchema.or(z.string()).describe('JSON answer (stream: false) or an event stream') }, [404, 409, 502, 504]),
        },
      },
      async (request, reply) => {
        const body = request.body;
        const { message, history, callerInstructions } = conversationOf(body);
        const exchangeRequest: ExchangeRequest = {
          ...agentOf(request.params.agentId),
          message,
          history,
          callerInstructions,
          sessionId: body.sessionId,
          userId: body.userId,
          enableMCPTools: body.enableMCPTools,
        };
        const workspaceId = actorOf(request).workspaceId;
        if (!body.stream) return chat.query(workspaceId, exchangeRequest, disconnectSignal(reply));
        const exchange = await chat.open(workspaceId, exchangeRequest);
        const ui = request.query.protocol === 'ui-message-stream' || (request.query.protocol !== 'native' && body.messages.some((m) => m.parts !== undefined));
        await streamExchange(request, reply, exchange, ui ? uiMessageEncoder() : nativeEncoder());
      },
    );

    app.get(
      '/api/ai-sdk/agents/:agentId/chat',
      {
        // Asking a question is an agent's act (as a POST is), even from an EventSource that can only GET.
        config: { role: ASKS },
        schema: {
          tags,
          summary: 'Chat with a persona from an EventSource',
          description:
            'The session’s stored history is the conversation; without `sessionId` a new session starts (announced in `done`). A reconnect with `Last-Event-ID` answers 204: answers are never replayed.',
          params: chatParams,
          querystring: chatGetQuerySchema,
          response: withErrors({ 200: eventStream, 204: z.undefined().describe('Reconnect: nothing is replayed') }, [404, 409]),
        },
      },
      async (request, reply) => {
        if (request.headers['last-event-id'] !== undefined) return reply.code(204).send();
        const q = request.query;
        const exchange = await chat.open(actorOf(request).workspaceId, {
          ...agentOf(request.params.agentId),
          message: q.message,
          sessionId: q.sessionId,
          userId: q.userId,
          enableMCPTools: q.enableMCPTools,
        });
        await streamExchange(request, reply, exchange, q.protocol === 'ui-message-stream' ? uiMessageEncoder() : nativeEncoder());
      },
    );
  };
}
