/**
 * The analytics statements of the SQLite backend (AnalyticsReads, analytics.store.ts; the
 * PostgreSQL ones are in src/db/postgres/analytics-reads.ts). Better-sqlite3 prepared statements
 * rather than Kysely: the scans run once per bucket (up to 367 per request) and Kysely adds a
 * compile and an object per row. A window's times come back as one `group_concat` string, which the
 * store parses: plucking them returned one JS value per row through the driver (figures in
 * analytics.store.ts). `messages` is Kysely, compiled once a batch (nothing next to reading 1,000
 * texts).
 */
import { sql } from 'kysely';
import { type ConversationExportRow, EXPORT_BATCH, type MessageBatchRow } from '../../business/analytics/analytics.export-store.js';
import { nearestRankPercentiles } from '../../business/analytics/analytics.buckets.js';
import { type AnalyticsReads, type AnswerScan, type Filter, integersInto, type Range } from '../../business/analytics/analytics.store.js';
import type { Db } from '../database.js';

const FILTER = '(@personaId IS NULL OR persona_id = @personaId) AND (@channelId IS NULL OR channel_id = @channelId)';
const inRange = (col: string) => `workspace_id = @ws AND ${col} >= @lo AND ${col} < @hi AND ${FILTER}`;
const params = (f: Filter, r: Range) => ({ ws: f.workspaceId, personaId: f.personaId ?? null, channelId: f.channelId ?? null, lo: r.lo, hi: r.hi });

type NumberColumn = 'answers' | 'errors' | 'avgLatencyMs' | 'promptTokens' | 'completionTokens';

/** A window's interactions in one scan, the times as lists of integers (null for none). */
interface PerformanceRow {
  all: number;
  errors: number;
  promptTokens: number;
  completionTokens: number;
  /** Successful answers: as many latencies as `latencyList` holds. */
  answers: number;
  latencyList: string | null;
  /** Successful answers that streamed text: as many times as `ttftList` holds. */
  streamed: number;
  ttftList: string | null;
}

export function createSqliteAnalyticsReads({ sqlite, kysely: k }: Db): AnalyticsReads {
  const performanceScan = sqlite.prepare(
    `SELECT COUNT(*) AS "all", COALESCE(SUM(error IS NOT NULL), 0) AS errors, COALESCE(SUM(prompt_tokens), 0) AS promptTokens,
            COALESCE(SUM(completion_tokens), 0) AS completionTokens,
            COUNT(*) FILTER (WHERE error IS NULL) AS answers, group_concat(latency_ms) FILTER (WHERE error IS NULL) AS latencyList,
            COUNT(ttft_ms) FILTER (WHERE error IS NULL) AS streamed, group_concat(ttft_ms) FILTER (WHERE error IS NULL) AS ttftList
     FROM interactions WHERE ${inRange('started_at')}`,
  );
  const answerScan = sqlite.prepare(
    `SELECT COALESCE(SUM(new_session), 0) AS conversations, COUNT(*) FILTER (WHERE error IS NULL) AS answers,
            COALESCE(SUM(latency_ms) FILTER (WHERE error IS NULL), 0) AS latencySum, group_concat(latency_ms) FILTER (WHERE error IS NULL) AS latencyList
     FROM interactions WHERE ${inRange('started_at')}`,
  );
  const conversationsOnly = sqlite.prepare(`SELECT COUNT(*) FROM interactions WHERE ${inRange('started_at')} AND new_session = 1`).pluck();
  const ratings = sqlite.prepare(`SELECT COUNT(*) AS count, COALESCE(SUM(rating), 0) AS sum FROM feedback WHERE ${inRange('created_at')}`);

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
   * With each message: its session's persona, A/B test, variant, channel and user (`session`, a
   * JSON array), and the interaction of its exchange's answer (`answer`: message id, user, latency,
   * tokens, rating). Tool rounds (an assistant message that calls tools, the tool results) are left
   * out.
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
    answerScans: async (f, ranges) => ranges.map((r) => answerScan.get(params(f, r)) as AnswerScan),
    conversationCounts: async (f, ranges) => ranges.map((r) => conversationsOnly.get(params(f, r)) as number),
    ratingTotals: async (f, ranges) => ranges.map((r) => ratings.get(params(f, r)) as { count: number; sum: number }),
    async performanceScan(f, r, fractions) {
      const row = performanceScan.get(params(f, r)) as PerformanceRow;
      const latencies = new Float64Array(row.answers);
      const firstTokens = new Float64Array(row.streamed);
      integersInto(row.latencyList, latencies, 0);
      integersInto(row.ttftList, firstTokens, 0);
      return {
        all: row.all,
        errors: row.errors,
        promptTokens: row.promptTokens,
        completionTokens: row.completionTokens,
        latency: nearestRankPercentiles(latencies, fractions.latency),
        firstToken: nearestRankPercentiles(firstTokens, fractions.firstToken),
      };
    },

    async conversationBatch(workspaceId, at, id, hi) {
      const raw = conversationBatch.all({ ws: workspaceId, at, id, hi }) as Array<Omit<ConversationExportRow, NumberColumn> & { numbers: string }>;
      return raw.map(({ numbers, averageRating, ...session }): ConversationExportRow => {
        const [answers, errors, avgLatencyMs, promptTokens, completionTokens] = JSON.parse(numbers) as [number, number, number | null, number, number];
        return { ...session, answers, errors, avgLatencyMs, promptTokens, completionTokens, averageRating };
      });
    },

    async messageBatch(workspaceId, at, seq, hi): Promise<MessageBatchRow[]> {
      const batch = await messageBatch(workspaceId, at, seq, hi);
      return batch.map((m) => {
        const session = m.session === null ? null : (JSON.parse(m.session) as [string, string | null, string | null, string | null, string | null]);
        const answer = m.answer === null ? null : (JSON.parse(m.answer) as [string, string | null, number, number, number, number | null]);
        return {
          seq: m.seq,
          id: m.id,
          sessionId: m.session_id,
          role: m.role,
          content: m.content,
          createdAt: m.created_at,
          session: session && { personaId: session[0], abTestId: session[1], variant: session[2], channelId: session[3], userId: session[4] },
          answer: answer && { messageId: answer[0], userId: answer[1], latencyMs: answer[2], promptTokens: answer[3], completionTokens: answer[4], rating: answer[5] },
        };
      });
    },
  };
}
