import type { MessageRow, SessionRow } from '../../db/schema.js';
import { NotFoundError } from '../../errors.js';
import type { ChannelExists } from '../../lib/channel-exists.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import type { Actor } from '../auth/actor.js';
import { auditRow } from '../audit/audit.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import type { HandoffPort } from './chat.service.js';
import type { PersonaService } from '../personas/personas.service.js';
import type { FeedbackInput, FeedbackResult, Session, SessionDetail } from './chat.schemas.js';
import type { ChatStore, SessionFilter } from './chat.store.js';

export function toSession(row: SessionRow): Session {
  return {
    id: row.id,
    personaId: row.persona_id,
    abTestId: row.ab_test_id,
    variant: row.variant,
    channelId: row.channel_id,
    userId: row.user_id,
    title: row.title,
    messageCount: row.message_count,
    createdAt: row.created_at,
    lastMessageAt: row.last_message_at,
  };
}

function toMessage(row: MessageRow): SessionDetail['messages'][number] {
  return {
    id: row.id,
    role: row.role,
    content: row.content,
    ...(row.tool_calls !== null ? { toolCalls: JSON.parse(row.tool_calls) as NonNullable<SessionDetail['messages'][number]['toolCalls']> } : {}),
    ...(row.tool_call_id !== null ? { toolCallId: row.tool_call_id } : {}),
    ...(row.author !== null ? { author: row.author } : {}),
    createdAt: row.created_at,
  };
}

/** API.md §5: reading, rating and deleting sessions. */
export interface SessionServiceDeps {
  store: ChatStore;
  clock: Clock;
  /** A `personaId` filter must name a persona of the workspace (404 otherwise). */
  personas: PersonaService;
  /** Likewise a `channelId` filter. */
  channelExists: ChannelExists;
  /** A rating of 1–2 hands the conversation to the persona's team when its rules say so. */
  handoffs?: Pick<HandoffPort, 'open'>;
  /** For audit events' ids. */
  ids: IdGenerator;
}

export function createSessionService({ store, clock, personas, channelExists, handoffs, ids }: SessionServiceDeps) {
  async function find(workspaceId: string, id: string): Promise<SessionRow> {
    const row = await store.findSession(workspaceId, id);
    if (!row) throw new NotFoundError('Session', id);
    return row;
  }

  return {
    async list(workspaceId: string, page: PageRequest, filter: SessionFilter): Promise<Page<Session>> {
      // API.md §1: an id in a query that does not exist in the workspace → 404, not an empty list.
      if (filter.personaId !== undefined) await personas.get(workspaceId, filter.personaId);
      if (filter.channelId !== undefined && !(await channelExists(workspaceId, filter.channelId))) throw new NotFoundError('Channel', filter.channelId);
      return mapPage(await store.listSessions(workspaceId, page, filter), toSession);
    },

    async get(workspaceId: string, id: string): Promise<SessionDetail> {
      const row = await find(workspaceId, id);
      return { ...toSession(row), messages: (await store.messages(row.id)).map(toMessage) };
    },

    /**
     * Where a session's event stream starts: after `after` (a reconnect's last event), else after its
     * latest message. 404 when the session is not the workspace's, before the stream opens.
     */
    async eventsStart(workspaceId: string, id: string, after: number | undefined): Promise<number> {
      const row = await find(workspaceId, id);
      return after ?? store.latestPosition(row.id);
    },

    /**
     * The session's messages after the `after`-th (tool rounds left out), oldest first, each with
     * its position in the session (the event id); null once the session is gone.
     */
    async messagesAfter(workspaceId: string, id: string, after: number, limit: number) {
      const row = await store.findSession(workspaceId, id);
      if (!row) return null;
      return (await store.messagesAfter(row.id, after, limit)).map((m) => ({
        position: m.position,
        message: { id: m.id, role: m.role, content: m.content, ...(m.author !== null ? { author: m.author } : {}), createdAt: m.created_at },
      }));
    },

    /**
     * A rating. `actor`: who gave it through the API or MCP, recorded as `session.feedback`; absent
     * for a channel user's reaction, which is conversation (like their messages), not audited.
     */
    async feedback(workspaceId: string, id: string, input: FeedbackInput, actor?: Actor): Promise<FeedbackResult> {
      const session = await find(workspaceId, id);
      const answer = await store.findAnswer(session.id, input.messageId);
      if (input.messageId !== undefined && !answer) throw new NotFoundError('Answer', input.messageId);
      const createdAt = clock.now().toISOString();
      const row = {
        workspace_id: workspaceId,
        session_id: session.id,
        message_id: answer?.id ?? null,
        persona_id: session.persona_id,
        ab_test_id: session.ab_test_id,
        variant: session.variant,
        channel_id: session.channel_id,
        rating: input.rating,
        comment: input.comment ?? null,
        created_at: createdAt,
      };
      const fields = ['rating', ...(input.comment !== undefined ? ['comment'] : [])];
      await store.addFeedback(row, actor && auditRow(ids, clock, actor, { action: 'session.feedback', target: { type: 'session', id: session.id }, changes: fields }));
      if (handoffs && input.rating <= 2) {
        const persona = await personas.get(workspaceId, session.persona_id).catch(() => null);
        if (persona?.teamId && persona.handoff.lowRating) await handoffs.open(workspaceId, session, 'rule', `An answer was rated ${input.rating}/5.`);
      }
      return { sessionId: session.id, messageId: row.message_id, rating: row.rating, comment: row.comment, createdAt };
    },

    async delete(actor: Actor, id: string): Promise<void> {
      const event = auditRow(ids, clock, actor, { action: 'session.delete', target: { type: 'session', id } });
      if (!(await store.deleteSession(actor.workspaceId, id, clock.now().toISOString(), event))) throw new NotFoundError('Session', id);
    },
  };
}

export type SessionService = ReturnType<typeof createSessionService>;
