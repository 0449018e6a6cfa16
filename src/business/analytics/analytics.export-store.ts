/**
 * The rows of the analytics exports (API.md §8), read in keyset batches of EXPORT_BATCH so a file
 * of any size holds one batch in memory at a time. No statement stays open across an await
 * (better-sqlite3 refuses other statements on the connection while an iterator is open, and a
 * PostgreSQL cursor would hold a pooled connection for the whole download), so each batch is a
 * fresh query that continues after the last row of the one before.
 *
 * `answers` is one prepared read over the analytics index, the same SQL on both backends;
 * `conversations` and `messages` look up each row's session and interactions, which each dialect
 * writes its own way (AnalyticsReads in analytics.store.ts).
 */
import type { SqlBackend } from '../../db/backend.js';
import type { AnalyticsReads, Range } from './analytics.store.js';

/** Rows a batch of an export holds at most. */
export const EXPORT_BATCH = 1_000;

/** `answers`: one interaction (an answer, failed ones included), numbers only. */
export interface AnswerExportRow {
  startedAt: string;
  sessionId: string | null;
  personaId: string;
  /** The persona version that answered; null for answers older than version history. */
  personaVersion: number | null;
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

/**
 * One row of a `messages` batch: a user message or final answer, with its session's columns and the
 * interaction of its exchange's answer (the first final answer at or after it in its session: an
 * exchange's rows are written together, in order).
 */
export interface MessageBatchRow {
  seq: number;
  id: string;
  sessionId: string;
  role: string;
  content: string;
  createdAt: string;
  /** The session's columns; null never happens (the batch reads messages of the workspace's sessions) but the lookup allows it. */
  session: { personaId: string; abTestId: string | null; variant: string | null; channelId: string | null; userId: string | null } | null;
  /** The exchange's answer's interaction; null while none is recorded. */
  answer: { messageId: string; userId: string | null; latencyMs: number; promptTokens: number; completionTokens: number; rating: number | null } | null;
}

export function createAnalyticsExportStore({ prepare }: SqlBackend, reads: AnalyticsReads) {
  // Quoted aliases: PostgreSQL folds unquoted names to lower case. PostgreSQL's index ends at
  // started_at (SQLite appends the rowid, seq), so it sorts each run of equal times as it reads (an
  // incremental sort; generic plan checked over 500k answers: the scan stops after the batch).
  const answerBatch = prepare<AnswerExportRow & { seq?: number }>(
    `SELECT seq, started_at AS "startedAt", session_id AS "sessionId", persona_id AS "personaId", persona_version AS "personaVersion",
            ab_test_id AS "abTestId", variant, channel_id AS "channelId", user_id AS "userId", model, latency_ms AS "latencyMs", ttft_ms AS "ttftMs", prompt_tokens AS "promptTokens",
            completion_tokens AS "completionTokens", tool_calls AS "toolCalls", error, rating
     FROM interactions
     WHERE workspace_id = ? AND started_at >= ? AND (started_at > ? OR seq > ?) AND started_at < ?
     ORDER BY started_at, seq LIMIT ${EXPORT_BATCH}`,
  );

  return {
    /** Every interaction started in the range, oldest first, in batches. */
    async *answerRows(workspaceId: string, r: Range): AsyncGenerator<AnswerExportRow[]> {
      let at = r.lo;
      let seq = -1;
      for (;;) {
        const rows = await answerBatch.all(workspaceId, at, at, seq, r.hi);
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
        const batch = await reads.messageBatch(workspaceId, at, seq, r.hi);
        if (batch.length === 0) return;
        const last = batch[batch.length - 1]!;
        at = last.createdAt;
        seq = last.seq;
        const rows: MessageExportRow[] = [];
        for (const m of batch) {
          if (m.session === null) continue; // never: the WHERE found the session (for the type)
          const { answer } = m;
          const own = answer !== null && answer.messageId === m.id ? answer : null;
          rows.push({
            createdAt: m.createdAt,
            sessionId: m.sessionId,
            messageId: m.id,
            role: m.role as MessageExportRow['role'],
            content: m.content,
            personaId: m.session.personaId,
            abTestId: m.session.abTestId,
            variant: m.session.variant,
            channelId: m.session.channelId,
            userId: answer?.userId ?? m.session.userId,
            latencyMs: own?.latencyMs ?? null,
            promptTokens: own?.promptTokens ?? null,
            completionTokens: own?.completionTokens ?? null,
            rating: own?.rating ?? null,
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
        const rows = await reads.conversationBatch(workspaceId, at, id, r.hi);
        if (rows.length === 0) return;
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
