/**
 * The rows of the analytics exports (API.md §8), read in keyset batches of EXPORT_BATCH so a file
 * of any size holds one batch in memory at a time. No statement stays open across an await
 * (better-sqlite3 refuses other statements on the connection while an iterator is open), so each
 * batch is a fresh query that continues after the last row of the one before.
 *
 * `answers` and `conversations` are better-sqlite3 prepared statements over the analytics indexes
 * (see analytics.store.ts); `messages` is Kysely, compiled once a batch (nothing next to reading
 * 1,000 texts).
 */
import { sql } from 'kysely';
import type { Db } from '../../db/database.js';
import type { Range } from './analytics.store.js';

const EXPORT_BATCH = 1_000;

/** `answers`: one interaction (an answer, failed ones included), numbers only. */
export interface AnswerExportRow {
  startedAt: string;
  sessionId: string | null;
  personaId: string;
  abTestId: string | null;
  variant: string | null;
  channelId: string | null;
  userId: string | null;
  model: string;
  latencyMs: number;
  ttftMs: number | null;
  promptTokens: number;
  completionTokens: number;
  toolCalls: number;
  error: string | null;
  rating: number | null;
}

/** `messages`: one user message or answer with its text; the figures only on answers. */
export interface MessageExportRow {
  createdAt: string;
  sessionId: string;
  messageId: string;
  role: 'user' | 'assistant';
  content: string;
  personaId: string;
  abTestId: string | null;
  variant: string | null;
  channelId: string | null;
  userId: string | null;
  latencyMs: number | null;
  promptTokens: number | null;
  completionTokens: number | null;
  rating: number | null;
}

/** `conversations`: one session that still exists, with its numbers. */
export interface ConversationExportRow {
  sessionId: string;
  personaId: string;
  abTestId: string | null;
  variant: string | null;
  channelId: string | null;
  userId: string | null;
  title: string;
  messageCount: number;
  createdAt: string;
  lastMessageAt: string;
  answers: number;
  errors: number;
  avgLatencyMs: number | null;
  promptTokens: number;
  completionTokens: number;
  averageRating: number | null;
}

type NumberColumn = 'answers' | 'errors' | 'avgLatencyMs' | 'promptTokens' | 'completionTokens';

export function createAnalyticsExportStore(db: Db) {
  const { sqlite, kysely: k } = db;

  const answerBatch = sqlite.prepare(
    `SELECT seq, started_at AS startedAt, session_id AS sessionId, persona_id AS personaId, ab_test_id AS abTestId, variant,
            channel_id AS channelId, user_id AS userId, model, latency_ms AS latencyMs, ttft_ms AS ttftMs, prompt_tokens AS promptTokens,
            completion_tokens AS completionTokens, tool_calls AS toolCalls, error, rating
     FROM interactions
     WHERE workspace_id = @ws AND started_at >= @at AND (started_at > @at OR seq > @seq) AND started_at < @hi
     ORDER BY started_at, seq LIMIT ${EXPORT_BATCH}`,
  );
  // Per session, through the session indexes of interactions and feedback (a few rows each).
  const conversationBatch = sqlite.prepare(
    `SELECT s.id AS sessionId, s.persona_id AS personaId, s.ab_test_id AS abTestId, s.variant, s.channel_id AS channelId, s.user_id AS userId,
            s.title, s.message_count AS messageCount, s.created_at AS createdAt, s.last_message_at AS lastMessageAt,
            (SELECT json_array(COALESCE(SUM(error IS NULL), 0), COALESCE(SUM(error IS NOT NULL), 0), ROUND(AVG(CASE WHEN error IS NULL THEN latency_ms END)),
                               COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0))
             FROM interactions i WHERE i.session_id = s.id) AS numbers,
            (SELECT ROUND(AVG(rating), 2) FROM feedback f WHERE f.session_id = s.id) AS averageRating
     FROM sessions s
     WHERE s.workspace_id = @ws AND s.created_at >= @at AND (s.created_at > @at OR s.id > @id) AND s.created_at < @hi
     ORDER BY s.created_at, s.id LIMIT ${EXPORT_BATCH}`,
  );

  /**
   * One batch of the workspace's user messages and final answers written in [at…hi), after (at, seq),
   * in (created_at, seq) order; tool rounds (an assistant message that calls tools, the tool results)
   * are left out. With each row: its session's persona, A/B test, variant, channel and user
   * (`session`, a JSON array), and the interaction of its exchange's answer (`answer`: message id,
   * user, latency, tokens, rating). The answer of a user message is the first final answer after it
   * in its session: an exchange's rows are written together, in order.
   *
   * Everything is a correlated lookup by key from the message row (messages_created drives; one
   * probe of a primary key or index per value, whatever the workspace's size), because SQLite plans
   * the obvious forms badly. Measured on 400k messages in two workspaces: a join to sessions gets a
   * Bloom filter over the workspace's sessions, or a sort of the whole window, for every batch (19 s
   * and > 20 s for the export, 3 s for this form in the same prototype); `workspace_id = ? AND id IN (…batch…)`
   * scans the workspace's whole index (sessions_persona, interactions_analytics) for every batch
   * instead of probing the keys (5–9 ms a batch at 50k sessions and 200k answers, growing with the
   * workspace). The interaction's workspace is compared with the session's rather than with the
   * parameter: against a constant, SQLite with ANALYZE statistics scans interactions_analytics for
   * the workspace instead of probing interactions_message.
   */
  const messageBatch = (workspaceId: string, at: string, seq: number, hi: string) =>
    k
      .selectFrom('messages as m')
      .select((eb) => {
        const workspaceOfSession = eb.selectFrom('sessions as s').select('s.workspace_id').whereRef('s.id', '=', 'm.session_id');
        const answerOfExchange = eb
          .selectFrom('messages as a')
          .select('a.id')
          .whereRef('a.session_id', '=', 'm.session_id')
          .whereRef('a.seq', '>=', 'm.seq')
          .where('a.role', '=', 'assistant')
          .where('a.tool_calls', 'is', null)
          .orderBy('a.seq')
          .limit(1);
        return [
          'm.seq',
          'm.id',
          'm.session_id',
          'm.role',
          'm.content',
          'm.created_at',
          eb
            .selectFrom('sessions as s')
            .select(sql<string>`json_array(s.persona_id, s.ab_test_id, s.variant, s.channel_id, s.user_id)`.as('session'))
            .whereRef('s.id', '=', 'm.session_id')
            .where('s.workspace_id', '=', workspaceId)
            .as('session'),
          eb
            .selectFrom('interactions as i')
            .select(sql<string>`json_array(i.message_id, i.user_id, i.latency_ms, i.prompt_tokens, i.completion_tokens, i.rating)`.as('answer'))
            .where('i.message_id', '=', answerOfExchange)
            .where('i.workspace_id', '=', workspaceOfSession)
            .as('answer'),
        ];
      })
      .where((eb) => eb(eb.selectFrom('sessions as s').select('s.workspace_id').whereRef('s.id', '=', 'm.session_id'), '=', workspaceId))
      .where('m.created_at', '>=', at)
      .where((eb) => eb.or([eb('m.created_at', '>', at), eb('m.seq', '>', seq)]))
      .where('m.created_at', '<', hi)
      .where('m.role', 'in', ['user', 'assistant'])
      .where('m.tool_calls', 'is', null)
      .orderBy('m.created_at')
      .orderBy('m.seq')
      .limit(EXPORT_BATCH)
      .execute();

  return {
    /** Every interaction started in the range, oldest first, in batches. */
    async *answerRows(workspaceId: string, r: Range): AsyncGenerator<AnswerExportRow[]> {
      let at = r.lo;
      let seq = -1;
      for (;;) {
        const rows = answerBatch.all({ ws: workspaceId, at, seq, hi: r.hi }) as Array<AnswerExportRow & { seq?: number }>;
        if (rows.length === 0) return;
        const last = rows[rows.length - 1]!;
        at = last.startedAt;
        seq = last.seq!;
        for (const row of rows) delete row.seq;
        yield rows;
        if (rows.length < EXPORT_BATCH) return;
      }
    },

    /**
     * Every user message and answer of the workspace's sessions written in the range, oldest first
     * (ties in the order they were written), in batches. Persona, A/B test, variant and channel are
     * the session's; the user is the one of the exchange (a channel conversation may have several),
     * else the session's; latency, tokens and the latest rating are the answer's interaction's.
     */
    async *messageRows(workspaceId: string, r: Range): AsyncGenerator<MessageExportRow[]> {
      let at = r.lo;
      let seq = -1;
      for (;;) {
        const batch = await messageBatch(workspaceId, at, seq, r.hi);
        if (batch.length === 0) return;
        const last = batch[batch.length - 1]!;
        at = last.created_at;
        seq = last.seq;
        const rows: MessageExportRow[] = [];
        for (const m of batch) {
          if (m.session === null) continue; // never: the WHERE found the session (for the type)
          const [personaId, abTestId, variant, channelId, sessionUser] = JSON.parse(m.session) as [string, string | null, string | null, string | null, string | null];
          const answer = m.answer === null ? null : (JSON.parse(m.answer) as [string, string | null, number, number, number, number | null]);
          const own = answer !== null && answer[0] === m.id ? answer : null;
          rows.push({
            createdAt: m.created_at,
            sessionId: m.session_id,
            messageId: m.id,
            role: m.role as MessageExportRow['role'],
            content: m.content,
            personaId,
            abTestId,
            variant,
            channelId,
            userId: answer?.[1] ?? sessionUser,
            latencyMs: own?.[2] ?? null,
            promptTokens: own?.[3] ?? null,
            completionTokens: own?.[4] ?? null,
            rating: own?.[5] ?? null,
          });
        }
        if (rows.length > 0) yield rows;
        if (batch.length < EXPORT_BATCH) return;
      }
    },

    /** Every session opened in the range that still exists, with its numbers, oldest first, in batches. */
    async *conversationRows(workspaceId: string, r: Range): AsyncGenerator<ConversationExportRow[]> {
      let at = r.lo;
      let id = '';
      for (;;) {
        const raw = conversationBatch.all({ ws: workspaceId, at, id, hi: r.hi }) as Array<Omit<ConversationExportRow, NumberColumn> & { numbers: string }>;
        if (raw.length === 0) return;
        const rows = raw.map(({ numbers, averageRating, ...session }): ConversationExportRow => {
          const [answers, errors, avgLatencyMs, promptTokens, completionTokens] = JSON.parse(numbers) as [number, number, number | null, number, number];
          return { ...session, answers, errors, avgLatencyMs, promptTokens, completionTokens, averageRating };
        });
        const last = rows[rows.length - 1]!;
        at = last.createdAt;
        id = last.sessionId;
        yield rows;
        if (rows.length < EXPORT_BATCH) return;
      }
    },
  };
}

export type AnalyticsExportStore = ReturnType<typeof createAnalyticsExportStore>;
