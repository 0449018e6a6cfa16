/**
 * The analytics statements of the PostgreSQL backend (AnalyticsReads, analytics.store.ts; the
 * SQLite ones are in src/db/sqlite/analytics-reads.ts), as named prepared statements: parsed and
 * planned once per connection.
 *
 * Each statement is a round trip, so the bucketed scans answer every bucket in one statement: the
 * ranges go in as two arrays and each is a range scan of the covering index (a nested loop over
 * `unnest`), where a statement per bucket would pay a round trip per bucket (up to 367 a request).
 * The overview's times come back as one `string_agg` text, parsed by the store as SQLite's
 * `group_concat` is; the performance report's are ranked here by `percentile_disc` (sending and
 * parsing two lists of 500k times cost the service ~100 ms of CPU a request, and the report ~150 ms
 * of its p95 at 1M interactions). Counts and sums are BIGINT and NUMERIC, which the pool reads as
 * numbers (connection.ts).
 *
 * The filters compare a parameter with NULL, so they CAST it: PostgreSQL cannot infer the type of a
 * parameter that only `IS NULL` reads. They leave the index's leading (workspace, time) range alone,
 * so the generic plan of a named statement is the one a filtered query would get.
 *
 * Measured beside SQLite on the same rows (bench/analytics.ts generator: 1.05M interactions over 60
 * days, 112k messages; a 30-day window of 500k answers; a 2-core machine running a test loop, so
 * ±40 % run to run), SQLite → PostgreSQL, p50: overview buckets and latencies 86–131 → 105–195 ms;
 * performance scan 154–196 → 174–318 ms (without the two lists the scan takes 130 ms; `array_agg`
 * and a histogram by GROUPING SETS were no faster); tool calls by name 64–81 → 61–98 ms; answers
 * export of 500k rows 1.1–2.3 → 1.5–1.9 s; messages export of 50k rows 0.37–0.54 → 0.8 s (2.5 s
 * with JIT on: see messageBatch); conversations export of 6,250 sessions 23–40 → 39–48 ms. The
 * results were identical.
 */
import type { ConversationExportRow, MessageBatchRow } from '../../business/analytics/analytics.export-store.js';
import { EXPORT_BATCH } from '../../business/analytics/analytics.export-store.js';
import type { AnalyticsReads, AnswerScan, Filter, Range } from '../../business/analytics/analytics.store.js';
import type { SqlBackend } from '../backend.js';

const FILTER = '(CAST(? AS TEXT) IS NULL OR persona_id = ?) AND (CAST(? AS TEXT) IS NULL OR channel_id = ?)';
const filterParams = (f: Filter) => {
  const personaId = f.personaId ?? null;
  const channelId = f.channelId ?? null;
  return [personaId, personaId, channelId, channelId];
};

/** Every bucket of a request: `b.lo`, `b.hi`, in the order given (`b.n`); first in each statement, so its parameters come first. */
const BUCKETS = 'unnest(CAST(? AS TEXT[]), CAST(? AS TEXT[])) WITH ORDINALITY AS b(lo, hi, n)';
const bucketParams = (ranges: Range[]) => [ranges.map((r) => r.lo), ranges.map((r) => r.hi)];

interface MessageRow {
  seq: number;
  id: string;
  sessionId: string;
  role: string;
  content: string;
  createdAt: string;
  personaId: string;
  abTestId: string | null;
  variant: string | null;
  channelId: string | null;
  sessionUserId: string | null;
  answerId: string | null;
  answerUserId: string | null;
  latencyMs: number | null;
  promptTokens: number | null;
  completionTokens: number | null;
  rating: number | null;
}

export function createPostgresAnalyticsReads({ prepare }: SqlBackend): AnalyticsReads {
  const answerScans = prepare<AnswerScan>(
    `SELECT x.conversations, x.answers, x."latencySum", x."latencyList"
     FROM ${BUCKETS}
     CROSS JOIN LATERAL (
       SELECT COALESCE(SUM(new_session), 0) AS conversations, COUNT(*) FILTER (WHERE error IS NULL) AS answers,
              COALESCE(SUM(latency_ms) FILTER (WHERE error IS NULL), 0) AS "latencySum",
              string_agg(CAST(latency_ms AS TEXT), ',') FILTER (WHERE error IS NULL) AS "latencyList"
       FROM interactions
       WHERE workspace_id = ? AND started_at >= b.lo AND started_at < b.hi AND ${FILTER}
     ) x
     ORDER BY b.n`,
  );
  const conversationCounts = prepare<{ conversations: number }>(
    `SELECT x.conversations
     FROM ${BUCKETS}
     CROSS JOIN LATERAL (
       SELECT COUNT(*) AS conversations FROM interactions
       WHERE workspace_id = ? AND started_at >= b.lo AND started_at < b.hi AND ${FILTER} AND new_session = 1
     ) x
     ORDER BY b.n`,
  );
  const ratingTotals = prepare<{ count: number; sum: number }>(
    `SELECT x."count", x."sum"
     FROM ${BUCKETS}
     CROSS JOIN LATERAL (
       SELECT COUNT(*) AS "count", COALESCE(SUM(rating), 0) AS "sum" FROM feedback
       WHERE workspace_id = ? AND created_at >= b.lo AND created_at < b.hi AND ${FILTER}
     ) x
     ORDER BY b.n`,
  );
  // percentile_disc(q) is the value at rank ceil(q · n) of the ascending values: the service's nearest
  // rank (analytics.buckets.ts), so the times are ranked here rather than sent as lists.
  const performanceScan = prepare<{ all: number; errors: number; promptTokens: number; completionTokens: number; latency: number[] | null; firstToken: number[] | null }>(
    `SELECT COUNT(*) AS "all", COUNT(*) FILTER (WHERE error IS NOT NULL) AS errors, COALESCE(SUM(prompt_tokens), 0) AS "promptTokens",
            COALESCE(SUM(completion_tokens), 0) AS "completionTokens",
            CAST(percentile_disc(CAST(? AS FLOAT8[])) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE error IS NULL) AS FLOAT8[]) AS latency,
            CAST(percentile_disc(CAST(? AS FLOAT8[])) WITHIN GROUP (ORDER BY ttft_ms) FILTER (WHERE error IS NULL AND ttft_ms IS NOT NULL) AS FLOAT8[]) AS "firstToken"
     FROM interactions WHERE workspace_id = ? AND started_at >= ? AND started_at < ? AND ${FILTER}`,
  );

  // The batch's sessions first, in the order of sessions_workspace (workspace, created_at, id), then
  // the numbers of those sessions only, through the session indexes of interactions and feedback (a
  // few rows each): joined before the LIMIT, a plan that sorts could look up every session of the
  // window for every batch.
  const conversationBatch = prepare<ConversationExportRow>(
    `SELECT s.id AS "sessionId", s.persona_id AS "personaId", s.ab_test_id AS "abTestId", s.variant, s.channel_id AS "channelId", s.user_id AS "userId",
            s.title, s.message_count AS "messageCount", s.created_at AS "createdAt", s.last_message_at AS "lastMessageAt",
            n.answers, n.errors, n."avgLatencyMs", n."promptTokens", n."completionTokens", r."averageRating"
     FROM (SELECT * FROM sessions
           WHERE workspace_id = ? AND created_at >= ? AND (created_at > ? OR id > ?) AND created_at < ?
           ORDER BY created_at, id LIMIT ${EXPORT_BATCH}) s
     CROSS JOIN LATERAL (
       SELECT COUNT(*) FILTER (WHERE error IS NULL) AS answers, COUNT(*) FILTER (WHERE error IS NOT NULL) AS errors,
              ROUND(AVG(latency_ms) FILTER (WHERE error IS NULL)) AS "avgLatencyMs",
              COALESCE(SUM(prompt_tokens), 0) AS "promptTokens", COALESCE(SUM(completion_tokens), 0) AS "completionTokens"
       FROM interactions WHERE session_id = s.id
     ) n
     CROSS JOIN LATERAL (SELECT ROUND(AVG(rating), 2) AS "averageRating" FROM feedback WHERE session_id = s.id) r
     ORDER BY s.created_at, s.id`,
  );

  /*
   * The batch's messages first: the window's messages after the key, each kept when its session (a
   * primary-key probe, a subquery PostgreSQL never turns into a join) is the workspace's, as the
   * SQLite backend reads them. messages_created orders by created_at alone (SQLite appends the rowid
   * to an index; PostgreSQL does not), and the estimate for that session test is one row, so a
   * generic plan read the whole window and sorted it by (created_at, seq) for every batch (200 ms a
   * batch on a 30-day window of 112k messages). So the batch's last time
   * is found first, by the first EXPORT_BATCH matches in index order (a scan that stops), and only
   * the rows up to that time are sorted: 28 ms a batch, whatever the window. The custom plans of the
   * first executions (before the generic plan) cost that whole-window scan in the estimate, which
   * is over jit_above_cost: with JIT on (the server default), each of them compiled for 440 ms.
   *
   * Then, for those rows only, the session's columns and the interaction of the exchange's answer:
   * the first final answer at or after the message in its session (messages_session), then that
   * message's interaction (interactions_message), the oldest of the session's workspace. It is found
   * by message id alone and its workspace compared after (the session's workspace sorted first): with
   * the workspace in the index condition, a plan without statistics intersected it with the
   * workspace's whole interactions_analytics range for every row (450 ms a batch at 2,350
   * interactions, 9 ms this way).
   */
  const matching = (m: string) =>
    `${m}.created_at >= ? AND (${m}.created_at > ? OR ${m}.seq > ?) AND ${m}.created_at < ? AND ${m}.role IN ('user', 'assistant') AND ${m}.tool_calls IS NULL
     AND (SELECT s.workspace_id FROM sessions s WHERE s.id = ${m}.session_id) = ?`;
  const messageBatch = prepare<MessageRow>(
    `SELECT m.seq, m.id, m.session_id AS "sessionId", m.role, m.content, m.created_at AS "createdAt",
            s.persona_id AS "personaId", s.ab_test_id AS "abTestId", s.variant, s.channel_id AS "channelId", s.user_id AS "sessionUserId",
            i.message_id AS "answerId", i.user_id AS "answerUserId", i.latency_ms AS "latencyMs", i.prompt_tokens AS "promptTokens",
            i.completion_tokens AS "completionTokens", i.rating
     FROM (SELECT * FROM messages m
           WHERE ${matching('m')}
             AND m.created_at <= (SELECT MAX(c.created_at) FROM (SELECT n.created_at FROM messages n WHERE ${matching('n')} ORDER BY n.created_at LIMIT ${EXPORT_BATCH}) c)
           ORDER BY m.created_at, m.seq LIMIT ${EXPORT_BATCH}) m
     CROSS JOIN LATERAL (SELECT * FROM sessions s WHERE s.id = m.session_id LIMIT 1) s
     LEFT JOIN LATERAL (
       SELECT i.workspace_id, i.message_id, i.user_id, i.latency_ms, i.prompt_tokens, i.completion_tokens, i.rating
       FROM interactions i
       WHERE i.message_id = (SELECT a.id FROM messages a
                             WHERE a.session_id = m.session_id AND a.seq >= m.seq AND a.role = 'assistant' AND a.tool_calls IS NULL
                             ORDER BY a.seq LIMIT 1)
       ORDER BY i.workspace_id <> s.workspace_id, i.seq LIMIT 1
     ) i ON i.workspace_id = s.workspace_id
     ORDER BY m.created_at, m.seq`,
  );

  return {
    answerScans: (f, ranges) => answerScans.all(...bucketParams(ranges), f.workspaceId, ...filterParams(f)),
    conversationCounts: async (f, ranges) => (await conversationCounts.all(...bucketParams(ranges), f.workspaceId, ...filterParams(f))).map((r) => r.conversations),
    ratingTotals: (f, ranges) => ratingTotals.all(...bucketParams(ranges), f.workspaceId, ...filterParams(f)),
    async performanceScan(f, r, fractions) {
      const row = (await performanceScan.first(fractions.latency, fractions.firstToken, f.workspaceId, r.lo, r.hi, ...filterParams(f)))!;
      // No values: percentile_disc answers NULL for the whole array.
      const ranked = (values: number[] | null, qs: readonly number[]) => values ?? qs.map(() => null);
      return { ...row, latency: ranked(row.latency, fractions.latency), firstToken: ranked(row.firstToken, fractions.firstToken) };
    },
    conversationBatch: (workspaceId, at, id, hi) => conversationBatch.all(workspaceId, at, at, id, hi),

    async messageBatch(workspaceId, at, seq, hi): Promise<MessageBatchRow[]> {
      const key = [at, at, seq, hi, workspaceId];
      const rows = await messageBatch.all(...key, ...key);
      return rows.map((m) => ({
        seq: m.seq,
        id: m.id,
        sessionId: m.sessionId,
        role: m.role,
        content: m.content,
        createdAt: m.createdAt,
        session: { personaId: m.personaId, abTestId: m.abTestId, variant: m.variant, channelId: m.channelId, userId: m.sessionUserId },
        answer:
          m.answerId === null
            ? null
            : { messageId: m.answerId, userId: m.answerUserId, latencyMs: m.latencyMs!, promptTokens: m.promptTokens!, completionTokens: m.completionTokens!, rating: m.rating },
      }));
    },
  };
}
