/**
 * Analytics reads over interactions, feedback and interaction_tools (API.md §8), one store for both
 * backends. Every statement is led by (workspace_id, time range) and answered from the covering
 * indexes of migration 009.
 *
 * What differs by dialect sits behind `AnalyticsReads`, chosen once per backend: the scans that
 * read a window's times as one list (`group_concat` on SQLite, `string_agg` on PostgreSQL), the
 * per-bucket scans (a prepared statement per bucket on SQLite, where a call costs microseconds; one
 * statement over every bucket on PostgreSQL, where each statement is a round trip) and the exports'
 * per-session lookups (src/db/sqlite/analytics-reads.ts, src/db/postgres/analytics-reads.ts). The
 * rest is written once here as prepared reads with `?` placeholders: better-sqlite3 statements on
 * SQLite, named statements on PostgreSQL. On SQLite they plan as the named-parameter statements they
 * replace did (EXPLAIN QUERY PLAN compared on the bench data) and take as long.
 *
 * Each report reads its window once: the sums and the times the percentiles need come from the
 * same range scan. On SQLite the times come as a list of integers parsed into a Float64Array (here
 * for the overview, in the dialect module for the performance report); PostgreSQL ranks them itself
 * (`percentile_disc`, the same nearest rank), so the performance report's times never leave it. Measured on
 * SQLite over a 30-day window of 490k answers (bench/analytics.ts data, in process): the performance
 * report's totals and both times in one scan 98 ms, where a separate totals scan and a plucked
 * column of the times took 46 + 113 ms; the overview's 31 daily sums and latencies 65 ms instead of
 * 44 + 73 ms. Plucking returns one JS value per row through the driver; the list is one string.
 * Tool calls grouped by name: 38 ms, most of it SQLite's sort. The exports' rows:
 * analytics.export-store.ts.
 */
import type { SqlBackend } from '../../db/backend.js';
import type { SessionRow } from '../../db/schema.js';
import { type ConversationExportRow, createAnalyticsExportStore, type MessageBatchRow } from './analytics.export-store.js';

export interface Filter {
  workspaceId: string;
  personaId?: string | undefined;
  channelId?: string | undefined;
}

/** A half-open range [lo, hi) of ISO times. */
export interface Range {
  lo: string;
  hi: string;
}

export interface PerformanceTotals {
  /** Every interaction, failed ones included. */
  all: number;
  errors: number;
  promptTokens: number;
  completionTokens: number;
  /**
   * Nearest-rank percentiles (analytics.buckets.ts) of the latencies of the successful answers and
   * of the times to first text of those that streamed some (ms), one per fraction asked for; null
   * when there are none.
   */
  latency: Array<number | null>;
  firstToken: Array<number | null>;
}

/** The fractions of a performance scan's two percentile lists. */
export interface PerformanceFractions {
  latency: readonly number[];
  firstToken: readonly number[];
}

export interface AnswerTotals {
  /** Sessions opened (answers with new_session = 1). */
  conversations: number;
  /** Successful answers and the sum of their latencies. */
  answers: number;
  latencySum: number;
}

/** One range's answers, with the latencies of the successful ones as a list of integers ("12,40"; null for none). */
export interface AnswerScan extends AnswerTotals {
  latencyList: string | null;
}

/**
 * The analytics statements whose SQL differs by dialect (ANCHORS-storage.md, rule 1). Every number
 * comes back as a JavaScript number; ranges are answered in the order given.
 */
export interface AnalyticsReads {
  /** Per range: conversations opened, successful answers, their latency sum and their latencies. */
  answerScans(f: Filter, ranges: Range[]): Promise<AnswerScan[]>;
  /** Conversations opened in each range. */
  conversationCounts(f: Filter, ranges: Range[]): Promise<number[]>;
  /** Count and sum of the feedback ratings given in each range. */
  ratingTotals(f: Filter, ranges: Range[]): Promise<Array<{ count: number; sum: number }>>;
  /** Counts, token sums and the percentiles of both answer times of one range, in one scan. */
  performanceScan(f: Filter, r: Range, fractions: PerformanceFractions): Promise<PerformanceTotals>;
  /**
   * Up to EXPORT_BATCH sessions of the workspace created in [at…hi) after (at, id), in (created_at,
   * id) order, each with the numbers of its interactions and feedback.
   */
  conversationBatch(workspaceId: string, at: string, id: string, hi: string): Promise<ConversationExportRow[]>;
  /**
   * Up to EXPORT_BATCH of the workspace's user messages and final answers written in [at…hi) after
   * (at, seq), in (created_at, seq) order; see MessageBatchRow.
   */
  messageBatch(workspaceId: string, at: string, seq: number, hi: string): Promise<MessageBatchRow[]>;
}

const FILTER = '(CAST(? AS TEXT) IS NULL OR persona_id = ?) AND (CAST(? AS TEXT) IS NULL OR channel_id = ?)';
/** The conditions of a range read of the workspace, filtered; its parameters: `rangeParams`. */
const inRange = (col: string) => `workspace_id = ? AND ${col} >= ? AND ${col} < ? AND ${FILTER}`;
const rangeParams = (f: Filter, r: Range) => {
  const personaId = f.personaId ?? null;
  const channelId = f.channelId ?? null;
  return [f.workspaceId, r.lo, r.hi, personaId, personaId, channelId, channelId];
};

/**
 * Parses a list of integers ("12,-3,40"; null for none) into `out` from `at`, and returns where it
 * stopped: one pass over the characters, no string per number. The columns read this way are
 * integers on both backends, so the list holds digits, minus signs and commas only.
 */
export function integersInto(list: string | null, out: Float64Array, at: number): number {
  if (list === null) return at;
  let n = at;
  let v = 0;
  let sign = 1;
  for (let i = 0; i < list.length; i++) {
    const c = list.charCodeAt(i);
    if (c === 44) {
      out[n++] = sign * v;
      v = 0;
      sign = 1;
    } else if (c === 45) sign = -1;
    else v = v * 10 + (c - 48);
  }
  out[n++] = sign * v;
  return n;
}

/**
 * `reads`: the backend's dialect module; by default the one of its kind. Both are created here, once
 * per store, so their statements are prepared once.
 */
export function createAnalyticsStore(backend: SqlBackend, reads: AnalyticsReads) {
  const { prepare } = backend;
  const byPersona = prepare<{ id: string; n: number }>(
    `SELECT persona_id AS id, COUNT(*) AS n FROM interactions WHERE ${inRange('started_at')} AND new_session = 1
     GROUP BY persona_id ORDER BY 2 DESC, 1`,
  );
  const byChannel = prepare<{ id: string; n: number }>(
    `SELECT channel_id AS id, COUNT(*) AS n FROM interactions WHERE ${inRange('started_at')} AND new_session = 1 AND channel_id IS NOT NULL
     GROUP BY channel_id ORDER BY 2 DESC, 1`,
  );
  const byTool = prepare<{ name: string; calls: number; failures: number }>(
    `SELECT tool_name AS name, COUNT(*) AS calls, SUM(is_error) AS failures FROM interaction_tools WHERE ${inRange('started_at')}
     GROUP BY tool_name ORDER BY 2 DESC, 1`,
  );
  const recent = prepare<SessionRow>(
    `SELECT * FROM sessions WHERE ${inRange('created_at')} ORDER BY created_at DESC, id DESC LIMIT ?`,
  );

  // Per version of one persona: answers, failures, ratings and tokens; then the successful answers' times for the percentiles.
  const versionTotals = prepare<{ version: number | null; all: number; errors: number; rated: number; ratingSum: number | null; prompt: number | null; completion: number | null; latencySum: number | null }>(
    `SELECT persona_version AS version, COUNT(*) AS "all", SUM(CASE WHEN error IS NULL THEN 0 ELSE 1 END) AS errors,
            COUNT(rating) AS rated, SUM(rating) AS "ratingSum", SUM(prompt_tokens) AS prompt, SUM(completion_tokens) AS completion,
            SUM(CASE WHEN error IS NULL THEN latency_ms ELSE 0 END) AS "latencySum"
     FROM interactions WHERE workspace_id = ? AND started_at >= ? AND started_at < ? AND persona_id = ?
     GROUP BY persona_version`,
  );
  const versionLatencies = prepare<{ version: number | null; latency: number }>(
    `SELECT persona_version AS version, latency_ms AS latency FROM interactions
     WHERE workspace_id = ? AND started_at >= ? AND started_at < ? AND persona_id = ? AND error IS NULL`,
  );

  return {
    /** One persona's answers in a range, grouped by the version that gave them (null: before versions were kept). */
    async byVersion(workspaceId: string, personaId: string, r: Range) {
      const params = [workspaceId, r.lo, r.hi, personaId];
      const [totals, latencies] = await Promise.all([versionTotals.all(...params), versionLatencies.all(...params)]);
      return totals.map((t) => ({
        version: t.version === null ? null : Number(t.version),
        all: Number(t.all),
        errors: Number(t.errors ?? 0),
        rated: Number(t.rated),
        ratingSum: Number(t.ratingSum ?? 0),
        promptTokens: Number(t.prompt ?? 0),
        completionTokens: Number(t.completion ?? 0),
        latencySum: Number(t.latencySum ?? 0),
        latencies: latencies.filter((l) => l.version === t.version).map((l) => Number(l.latency)),
      }));
    },

    /**
     * Per range: conversations opened, successful answers and their latency sum; and the latencies
     * of every successful answer in all the ranges (ms, no order). One scan of each range.
     */
    async answerTotals(f: Filter, ranges: Range[]): Promise<{ totals: AnswerTotals[]; latencies: Float64Array }> {
      const rows = await reads.answerScans(f, ranges);
      const latencies = new Float64Array(rows.reduce((a, row) => a + row.answers, 0));
      let at = 0;
      for (const row of rows) at = integersInto(row.latencyList, latencies, at);
      return { totals: rows.map(({ conversations, answers, latencySum }) => ({ conversations, answers, latencySum })), latencies };
    },

    /** Conversations opened in each range. */
    conversationCounts: (f: Filter, ranges: Range[]): Promise<number[]> => reads.conversationCounts(f, ranges),

    /** Count and sum of the feedback ratings given in each range. */
    ratingTotals: (f: Filter, ranges: Range[]): Promise<Array<{ count: number; sum: number }>> => reads.ratingTotals(f, ranges),

    /** Interaction counts, token sums and the percentiles of the answer times of the range, in one scan. */
    performanceTotals: (f: Filter, r: Range, fractions: PerformanceFractions): Promise<PerformanceTotals> => reads.performanceScan(f, r, fractions),

    /** Conversations opened in the range per persona or per channel, most first (ties by id). */
    async conversationsBy(f: Filter, r: Range, key: 'persona' | 'channel'): Promise<Array<[string, number]>> {
      const rows = await (key === 'persona' ? byPersona : byChannel).all(...rangeParams(f, r));
      return rows.map((row) => [row.id, row.n]);
    },

    /** Calls and failed calls per tool in the range, most called first (ties by name). */
    async toolCalls(f: Filter, r: Range): Promise<Array<[string, number, number]>> {
      const rows = await byTool.all(...rangeParams(f, r));
      return rows.map((row) => [row.name, row.calls, row.failures]);
    },

    /** The newest sessions opened in the range (ties by id, descending). */
    recentSessions: (f: Filter, r: Range, limit: number): Promise<SessionRow[]> => recent.all(...rangeParams(f, r), limit),

    ...createAnalyticsExportStore(backend, reads),
  };
}

export type AnalyticsStore = ReturnType<typeof createAnalyticsStore>;
