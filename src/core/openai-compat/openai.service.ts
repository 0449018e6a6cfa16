/**
 * Personas and running A/B tests served as OpenAI "models". A completion request is a stateless
 * conversation: it becomes the chat service's caller history, caller instructions and question,
 * and lands in one session per conversation (the `x-switchboard-session-id` header, else the
 * session whose recorded turns hash to the request's earlier turns).
 */
import crypto from 'node:crypto';
import type { AbTestService } from '../../business/ab-tests/ab-tests.service.js';
import { NotFoundError, ValidationError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { ChatMessage } from '../../llm/llm-client.js';
import type { Answer } from '../chat/chat.schemas.js';
import { MESSAGE_MAX } from '../chat/chat.schemas.js';
import type { ChatService, Exchange } from '../chat/chat.service.js';
import type { PersonaService } from '../personas/personas.service.js';
import { ModelNotFoundError } from './openai.errors.js';
import type { CompletionBody, CompletionMessage, OpenAiModel } from './openai.schemas.js';
import type { OpenAiThreadStore, ThreadKey } from './openai.store.js';

const OWNER = 'switchboard';
const PAGE = 100;

export interface OpenAiServiceDeps {
  chat: ChatService;
  personas: PersonaService;
  abTests: AbTestService;
  threads: OpenAiThreadStore;
  clock: Clock;
}

type Turn = { role: 'user' | 'assistant'; content: string };

function textOf(m: CompletionMessage): string {
  if (typeof m.content === 'string') return m.content;
  return (m.content ?? []).map((p) => p.text ?? '').join('\n');
}

/**
 * The conversation identity: user and assistant texts in order (system messages left out, as
 * clients rewrite them, e.g. with today's date; blank turns left out, as they are not stored).
 */
export function hashTurns(turns: readonly Turn[]): string {
  let joined = '';
  for (const t of turns) {
    const text = t.content.trim();
    if (text !== '') joined += `${t.role}\u0000${text}\u0001`;
  }
  // One-shot: the same bytes as updating a Hash object turn by turn, without the object (~1 µs).
  return crypto.hash('sha256', joined, 'base64url');
}

/** The request's messages as the chat service takes them: earlier turns, caller instructions, the question. */
export function conversationOf(messages: CompletionMessage[]) {
  const lastIndex = messages.length - 1;
  const last = messages[lastIndex]!;
  const at = `messages.${lastIndex}`;
  if (last.role !== 'user') throw ValidationError.field(`${at}.role`, 'the last message must be the user’s');
  const message = textOf(last);
  if (message.trim() === '') throw ValidationError.field(`${at}.content`, 'must not be blank');
  if (message.length > MESSAGE_MAX) throw ValidationError.field(`${at}.content`, `must be at most ${MESSAGE_MAX} characters`);
  const history: Turn[] = [];
  const callerInstructions: string[] = [];
  for (const m of messages.slice(0, -1)) {
    const text = textOf(m);
    if (text.trim() === '') continue;
    if (m.role === 'system' || m.role === 'developer') callerInstructions.push(text);
    else history.push({ role: m.role as Turn['role'], content: text });
  }
  return { message, history, callerInstructions };
}

export interface Completion {
  exchange: Exchange;
  /** Runs the exchange and records the conversation so far for the next turn to find. */
  run: Exchange['run'];
}

export function createOpenAiService({ chat, personas, abTests, threads, clock }: OpenAiServiceDeps) {
  const epoch = (iso: string) => Math.floor(Date.parse(iso) / 1000);

  async function allPages<T>(load: (page: { limit: number; cursor?: string }) => Promise<{ data: T[]; nextCursor: string | null }>): Promise<T[]> {
    const out: T[] = [];
    let cursor: string | undefined;
    do {
      const page = await load({ limit: PAGE, ...(cursor ? { cursor } : {}) });
      out.push(...page.data);
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
    return out;
  }

  async function getModel(workspaceId: string, id: string): Promise<OpenAiModel> {
    try {
      if (id.startsWith('abt_')) {
        const test = await abTests.get(workspaceId, id);
        // A promoted test keeps answering (with its winner), so clients that name it need no change.
        if (test.status !== 'running' && test.promoted === null) throw new ModelNotFoundError(id);
        return { id: test.id, object: 'model', created: epoch(test.startedAt ?? test.createdAt), owned_by: OWNER, name: test.name };
      }
      const persona = await personas.get(workspaceId, id);
      return { id: persona.id, object: 'model', created: epoch(persona.createdAt), owned_by: OWNER, name: persona.name };
    } catch (err) {
      if (err instanceof NotFoundError) throw new ModelNotFoundError(id);
      throw err;
    }
  }

  return {
    /** The workspace's personas, then its running and promoted A/B tests. */
    async listModels(workspaceId: string): Promise<OpenAiModel[]> {
      const [all, running, finished] = await Promise.all([
        allPages((page) => personas.list(workspaceId, page)),
        allPages((page) => abTests.list(workspaceId, page, 'running')),
        allPages((page) => abTests.list(workspaceId, page, 'completed')),
      ]);
      // A promoted test still answers (with its winner): clients that name it keep working.
      running.push(...finished.filter((t) => t.promoted !== null));
      return [
        ...all.map((p) => ({ id: p.id, object: 'model' as const, created: epoch(p.createdAt), owned_by: OWNER, name: p.name })),
        ...running.map((t) => ({ id: t.id, object: 'model' as const, created: epoch(t.startedAt ?? t.createdAt), owned_by: OWNER, name: t.name })),
      ];
    },

    getModel,

    /**
     * Opens one completion (every 4xx happens here, before a stream starts). The session: the
     * header's, else the one whose recorded turns are the request's earlier turns, else a new one.
     * The client's history is what the model sees (it is the conversation as the user knows it,
     * edits and regenerations included); the session is the record. With only a session header
     * and no earlier turns, the session's stored history is used.
     */
    async open(workspaceId: string, body: CompletionBody, sessionHeader: string | undefined): Promise<Completion> {
      const { message, history, callerInstructions } = conversationOf(body.messages);
      const base: Omit<ThreadKey, 'historyHash'> = { workspaceId, model: body.model, userKey: body.user ?? '' };
      let sessionId = sessionHeader;
      if (sessionId === undefined && history.length > 0) sessionId = await threads.find({ ...base, historyHash: hashTurns(history) });
      const byTest = body.model.startsWith('abt_');
      let exchange: Exchange;
      try {
        exchange = await chat.open(workspaceId, {
          ...(byTest ? { abTestId: body.model } : { personaId: body.model }),
          message,
          history: history.length > 0 || sessionHeader === undefined ? (history as ChatMessage[]) : undefined,
          callerInstructions,
          sessionId,
          userId: body.user || undefined,
          enableMCPTools: body.enable_mcp_tools ?? false,
          temperature: body.temperature ?? undefined,
          maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
          metadata: body.metadata ?? undefined,
        });
      } catch (err) {
        // Only on failure: is it the model that is missing (404 model_not_found), or the session?
        if (err instanceof NotFoundError) await getModel(workspaceId, body.model);
        throw err;
      }
      return {
        exchange,
        async run(emit, signal, options) {
          const answer = await exchange.run(emit, signal, options);
          const turns: Turn[] = [...history, { role: 'user', content: message }, { role: 'assistant', content: answer.response }];
          await threads.save({ ...base, historyHash: hashTurns(turns) }, answer.sessionId, clock.now().toISOString());
          return answer;
        },
      };
    },
  };
}

export type OpenAiService = ReturnType<typeof createOpenAiService>;
