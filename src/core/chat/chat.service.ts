/**
 * Exchanges: one question and its answer. `open` does every check that can fail with a 4xx before
 * a stream starts; `run` drives the agent and stores the whole exchange in one transaction.
 */
import type { SessionRow } from '../../db/schema.js';
import { AppError, ConflictError, NotFoundError, ValidationError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import type { ChatMessage } from '../../llm/llm-client.js';
import type { Persona } from '../personas/personas.schemas.js';
import type { PersonaService } from '../personas/personas.service.js';
import { type Agent, type AgentEvent, type AgentOutcome, HANDOFF_TOOL } from './agent.js';
import type { Answer } from './chat.schemas.js';
import type { ChatStore, NewInteraction, NewMessage } from './chat.store.js';

/** Stored turns read back as history; the token budget trims further. */
const HISTORY_MESSAGES = 100;
/** What a person said since the user's previous message, returned with their next one: at most this many messages. */
const UNSEEN_REPLIES = 50;
const TITLE_CHARS = 80;

export interface ExchangeRequest {
  /** Exactly one of personaId and abTestId: the persona, or the running A/B test that picks one. */
  personaId?: string | undefined;
  abTestId?: string | undefined;
  message: string;
  sessionId?: string | undefined;
  userId?: string | undefined;
  channelId?: string | undefined;
  /** The conversation so far, when the caller keeps it (AI SDK clients); else the session's is read. */
  history?: ChatMessage[] | undefined;
  callerInstructions?: string[] | undefined;
  enableMCPTools: boolean;
  model?: string | undefined;
  temperature?: number | undefined;
  maxTokens?: number | undefined;
  metadata?: Record<string, unknown> | undefined;
}

export interface Exchange {
  /** The session the answer goes into (new ones are created when it is stored). */
  sessionId: string;
  /** The answer's message id, fixed before it runs (an OpenAI completion id carries it from the first chunk). */
  messageId: string;
  /**
   * Runs the answer, emitting its events; resolves once it is stored. `streamed: false` when the
   * events are not read as they come (the model is then asked for one completion).
   */
  run(emit: (event: AgentEvent) => Promise<void> | void, signal: AbortSignal, options?: { streamed?: boolean }): Promise<Answer>;
}

/** What the chat needs of A/B tests: which persona answers (404 unknown, 409 not running). */
export interface AbTestRouter {
  route(workspaceId: string, abTestId: string, pick: { key: string } | { variant: 'A' | 'B' }): Promise<{ personaId: string; version?: number; variant: 'A' | 'B' }>;
}

/** A handoff as an answer names it. */
type HandoffState = { id: string; status: 'queued' | 'offered' | 'accepted' | 'resolved' | 'returned'; member: string | null };

/** What the chat needs of human handoff (business/handoffs): whether a person has the conversation, and handing it over. */
export interface HandoffPort {
  openFor(sessionId: string): Promise<HandoffState | undefined>;
  /** The session's latest handoff, open or ended (what a catch-up after a person handed back names). */
  latestFor(sessionId: string): Promise<HandoffState | undefined>;
  triggerOf(persona: Pick<Persona, 'teamId' | 'handoff'>, message: string): { trigger: 'user' | 'rule'; reason: string } | null;
  open(
    workspaceId: string,
    session: { id: string; persona_id: string },
    trigger: 'user' | 'tool' | 'rule' | 'api',
    reason: string,
    notify?: boolean,
    noticeId?: string,
  ): Promise<{ handoff: { id: string; status: string; member: string | null }; created: boolean; notice: string | null }>;
  /** Stores a user message in a conversation a person has (the persona stays silent). */
  userMessage(sessionId: string, id: string, text: string): Promise<void>;
}

export interface ChatServiceDeps {
  abTests: AbTestRouter;
  /** Human handoff; absent in tests of the chat alone. */
  handoffs?: HandoffPort;
  store: ChatStore;
  personas: PersonaService;
  agent: Agent;
  clock: Clock;
  ids: IdGenerator;
}

function titleOf(message: string): string {
  const line = message.replace(/\s+/g, ' ').trim();
  return line.length > TITLE_CHARS ? `${line.slice(0, TITLE_CHARS - 1)}…` : line;
}

export function createChatService(deps: ChatServiceDeps) {
  const { store, personas, agent, clock, ids } = deps;

  /**
   * What a person (and the notices) said since the user's previous message, for a user of the HTTP
   * API (a channel's user had it posted already): the text they are shown (each reply as
   * `<email> (a person): <text>`) and the messages. Null when nothing was said, or nobody could have.
   */
  async function caughtUp(workspaceId: string, session: SessionRow | undefined, request: ExchangeRequest) {
    if (!session || !deps.handoffs || session.channel_id !== null || request.channelId !== undefined) return null;
    const unseen = await store.unseenReplies(workspaceId, session.id, UNSEEN_REPLIES);
    if (unseen.length === 0) return null;
    return {
      text: unseen.map((m) => (m.author?.startsWith('human:') ? `${m.author.slice(6)} (a person): ${m.content}` : m.content)).join('\n\n'),
      messages: unseen.map((m) => ({ id: m.id, content: m.content, author: m.author!, createdAt: m.created_at })),
    };
  }

  /** The catch-up goes first, then the turn's own text (an answer or a notice), a blank line between. */
  const after = (said: { text: string } | null, text: string) => (said ? `${said.text}\n\n${text}` : text);

  /** The rows of one finished exchange, in the order they happened; the question alone when no answer came (`outcome` null: handed over). */
  function exchangeMessages(sessionId: string, answerId: string, message: string, outcome: AgentOutcome | null, now: string): NewMessage[] {
    const row = (role: NewMessage['role'], content: string, extra: Partial<NewMessage> = {}): NewMessage => ({
      id: ids('msg'),
      session_id: sessionId,
      role,
      content,
      tool_calls: null,
      tool_call_id: null,
      created_at: now,
      author: null,
      ...extra,
    });
    const rows = [row('user', message)];
    if (outcome === null) return rows;
    for (const calls of outcome.rounds) {
      rows.push(row('assistant', '', { tool_calls: JSON.stringify(calls) }));
      for (const call of calls) rows.push(row('tool', JSON.stringify(call.result ?? null), { tool_call_id: call.id }));
    }
    rows.push(row('assistant', outcome.content, { id: answerId }));
    return rows;
  }

  async function open(workspaceId: string, request: ExchangeRequest): Promise<Exchange> {
    let existing: SessionRow | undefined;
    if (request.sessionId !== undefined) {
      existing = await store.findSession(workspaceId, request.sessionId);
      if (!existing) throw new NotFoundError('Session', request.sessionId);
    }
    const sessionId = existing?.id ?? ids('ses');
    // An A/B test picks the persona: by the session's recorded variant, else by hashing the user (or the new session).
    let ab: { abTestId: string; variant: 'A' | 'B' } | null = null;
    let personaId = request.personaId;
    let version: number | undefined;
    if (request.abTestId !== undefined) {
      if (existing && existing.ab_test_id !== request.abTestId) throw new ConflictError(`Session ${existing.id} is not part of A/B test ${request.abTestId}.`);
      const pick = existing?.variant ? { variant: existing.variant } : { key: request.userId ?? sessionId };
      const routed = await deps.abTests.route(workspaceId, request.abTestId, pick);
      ab = { abTestId: request.abTestId, variant: routed.variant };
      personaId = routed.personaId;
      version = routed.version;
    }
    if (personaId === undefined) throw ValidationError.field('personaId', 'is required (exactly one of personaId and abTestId)');
    // A variant may pin a version of its persona (`per_…@3`); otherwise the current one answers.
    const persona = await personas.getAt(workspaceId, personaId, version);
    if (existing && existing.persona_id !== persona.id) {
      throw new ConflictError(`Session ${existing.id} belongs to persona ${existing.persona_id}, not ${persona.id}.`);
    }
    const abTestId = existing ? existing.ab_test_id : (ab?.abTestId ?? null);
    const variant = existing ? existing.variant : (ab?.variant ?? null);
    const history: ChatMessage[] =
      request.history ??
      (existing ? (await store.history(existing.id, HISTORY_MESSAGES)).map((m) => ({ role: m.role as 'user' | 'assistant', content: m.content })) : []);

    const answerId = ids('msg');
    // A person has the conversation: the persona stays silent, the message waits for them.
    const withPerson = existing && deps.handoffs ? await deps.handoffs.openFor(existing.id) : undefined;
    // `/human`, or a keyword of the persona's rules: the conversation goes to its team instead of the model.
    const handOver = !withPerson && deps.handoffs ? deps.handoffs.triggerOf(persona, request.message) : null;
    const base = { sessionId, messageId: answerId, personaId: persona.id, abTestId: existing ? existing.ab_test_id : (ab?.abTestId ?? null) };
    const noAnswer = { sources: [], toolCalls: [], usage: { promptTokens: 0, completionTokens: 0 }, finishReason: 'stop' as const };
    if (withPerson && existing && deps.handoffs) {
      const handoffs = deps.handoffs;
      return {
        sessionId,
        messageId: answerId,
        async run(emit) {
          const t0 = performance.now();
          const said = await caughtUp(workspaceId, existing, request);
          await handoffs.userMessage(existing.id, answerId, request.message);
          const response = said?.text ?? '';
          if (response !== '') await emit({ type: 'text', content: response });
          return {
            ...base,
            variant: existing.variant,
            response,
            ...noAnswer,
            latencyMs: Math.round(performance.now() - t0),
            handoff: { id: withPerson.id, status: withPerson.status, member: withPerson.member, ...(said ? { messages: said.messages } : {}) },
          };
        },
      };
    }
    return {
      sessionId,
      messageId: answerId,
      async run(emit, signal, options) {
        const startedAt = clock.now().toISOString();
        const t0 = performance.now();
        // A person handed the conversation back (or closed it) since the user's previous message: what they said comes first.
        const said = await caughtUp(workspaceId, existing, request);
        const saidHandoff = said && deps.handoffs ? await deps.handoffs.latestFor(sessionId) : undefined;
        /** The answer's `handoff`: the one this turn opened, else the one whose messages it catches up on. */
        const handoffOf = (opened: HandoffState | undefined): Answer['handoff'] => {
          const h = opened ?? saidHandoff;
          return h ? { id: h.id, status: h.status, member: h.member, ...(said ? { messages: said.messages } : {}) } : undefined;
        };
        if (said) await emit({ type: 'text', content: `${said.text}\n\n` });
        const interaction = (fields: Partial<NewInteraction>): NewInteraction => ({
          workspace_id: workspaceId,
          session_id: existing?.id ?? null,
          message_id: null,
          persona_id: persona.id,
          persona_version: persona.version,
          ab_test_id: abTestId,
          variant,
          channel_id: request.channelId ?? existing?.channel_id ?? null,
          user_id: request.userId ?? existing?.user_id ?? null,
          model: agent.modelFor(persona, request.model),
          started_at: startedAt,
          latency_ms: Math.round(performance.now() - t0),
          ttft_ms: null,
          prompt_tokens: 0,
          completion_tokens: 0,
          tool_calls: 0,
          error: null,
          metadata: request.metadata ? JSON.stringify(request.metadata) : null,
          new_session: 0,
          ...fields,
        });

        const sessionRow = (now: string): SessionRow =>
          existing
            ? { ...existing, last_message_at: now, user_id: request.userId ?? null }
            : {
                id: sessionId,
                workspace_id: workspaceId,
                persona_id: persona.id,
                ab_test_id: abTestId,
                variant,
                channel_id: request.channelId ?? null,
                user_id: request.userId ?? null,
                title: titleOf(request.message),
                message_count: 0,
                created_at: startedAt,
                last_message_at: now,
              };

        if (handOver && deps.handoffs) {
          // The message is kept (counted as the conversation's, with no model call), then the team takes over and the user is told.
          const now = clock.now().toISOString();
          const stored = await store.saveExchange({
            session: sessionRow(now),
            isNew: !existing,
            messages: exchangeMessages(sessionId, answerId, request.message, null, now),
            // The notice is this turn's answer (stored with the answer's id by the handoff): returned, so not caught up again.
            interaction: interaction({ session_id: sessionId, message_id: answerId, model: 'handoff', new_session: existing ? 0 : 1 }),
          });
          if (!stored) throw new ConflictError(`Session ${sessionId} was deleted while the message was written; nothing was stored.`);
          const opened = await deps.handoffs.open(workspaceId, { id: sessionId, persona_id: persona.id }, handOver.trigger, handOver.reason, true, answerId);
          const notice = opened.notice ?? 'A person already has this conversation and will reply here.';
          await emit({ type: 'text', content: notice });
          return {
            ...base,
            variant,
            response: after(said, notice),
            ...noAnswer,
            latencyMs: Math.round(performance.now() - t0),
            handoff: handoffOf({ id: opened.handoff.id, status: opened.handoff.status as 'queued', member: opened.handoff.member }),
          };
        }

        let outcome: AgentOutcome;
        try {
          outcome = await agent.run(
            {
              workspaceId,
              persona,
              history,
              message: request.message,
              callerInstructions: request.callerInstructions,
              enableTools: request.enableMCPTools,
              model: request.model,
              temperature: request.temperature,
              maxTokens: request.maxTokens,
              signal,
              streamed: options?.streamed ?? true,
              handoff: deps.handoffs !== undefined && persona.teamId !== null && persona.handoff.tool,
            },
            emit,
          );
        } catch (err) {
          const code = signal.aborted ? 'cancelled' : err instanceof AppError ? err.code : 'internal';
          // Nothing of a failed exchange joins the session (a retry would repeat the question); the numbers stay.
          await store.recordInteraction(interaction({ error: code }));
          throw err;
        }

        const now = clock.now().toISOString();
        const messages = exchangeMessages(sessionId, answerId, request.message, outcome, now);
        const answer = messages[messages.length - 1]!;
        const session = sessionRow(now);
        const latencyMs = Math.round(performance.now() - t0);
        const toolCalls = outcome.rounds.flat();
        const stored = await store.saveExchange({
          session,
          isNew: !existing,
          messages,
          interaction: interaction({
            session_id: sessionId,
            message_id: answer.id,
            model: outcome.model,
            latency_ms: latencyMs,
            ttft_ms: outcome.ttftMs,
            prompt_tokens: outcome.usage.promptTokens,
            completion_tokens: outcome.usage.completionTokens,
            tool_calls: toolCalls.length,
            new_session: existing ? 0 : 1,
            sources: outcome.sources.length,
          }),
          tools: toolCalls.map((c) => ({ name: c.name, isError: c.isError })),
        });
        if (!stored) throw new ConflictError(`Session ${sessionId} was deleted while the answer was written; nothing was stored.`);
        // The persona called `handoff`: its answer is stored; now its team takes the conversation.
        const handoffCall = deps.handoffs ? toolCalls.find((c) => c.name === HANDOFF_TOOL && !c.isError) : undefined;
        let handedOver: HandoffState | undefined;
        if (handoffCall && deps.handoffs) {
          const reason = (handoffCall.arguments as { reason?: unknown } | null)?.reason;
          const opened = await deps.handoffs.open(workspaceId, { id: sessionId, persona_id: persona.id }, 'tool', typeof reason === 'string' && reason.trim() ? reason : 'The persona handed the conversation over.');
          handedOver = { id: opened.handoff.id, status: opened.handoff.status as 'queued', member: opened.handoff.member };
        } else if (deps.handoffs && persona.teamId !== null && persona.handoff.noKnowledge !== null && outcome.sources.length === 0) {
          // The knowledge had nothing for this answer: after `noKnowledge` such answers in a row, the team takes over (the answer is still the user's).
          const n = persona.handoff.noKnowledge;
          if ((await store.noKnowledgeRun(workspaceId, sessionId, n)) >= n) {
            const reason = n === 1 ? 'No knowledge was found for the question.' : `No knowledge was found for ${n} questions in a row.`;
            const opened = await deps.handoffs.open(workspaceId, { id: sessionId, persona_id: persona.id }, 'rule', reason);
            // Already open (a person has it): this rule handed nothing over.
            if (opened.created) handedOver = { id: opened.handoff.id, status: opened.handoff.status as 'queued', member: opened.handoff.member };
          }
        }
        const handoff = handoffOf(handedOver);
        return {
          ...(handoff ? { handoff } : {}),
          sessionId,
          messageId: answer.id,
          personaId: persona.id,
          abTestId: session.ab_test_id,
          variant: session.variant,
          response: after(said, outcome.content),
          sources: outcome.sources,
          toolCalls: toolCalls.map(({ id, name, arguments: args, result }) => ({ id, name, arguments: args, result })),
          usage: outcome.usage,
          latencyMs,
          finishReason: outcome.finishReason,
        };
      },
    };
  }

  return {
    open,
    /** A whole answer without streaming (POST /query, `stream: false`). */
    async query(workspaceId: string, request: ExchangeRequest, signal: AbortSignal): Promise<Answer> {
      return (await open(workspaceId, request)).run(() => {}, signal, { streamed: false });
    },
  };
}

export type ChatService = ReturnType<typeof createChatService>;
