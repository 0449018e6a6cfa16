/**
 * API.md §8 analytics, computed from what was recorded: interactions (one per answer, failed ones
 * too), feedback ratings and per-tool call records. What counts where:
 *  - conversations: sessions opened in the window, counted from the answer that opened each
 *    (deleting a session keeps its count);
 *  - satisfaction: feedback ratings given in the window (average, count);
 *  - response time and latency percentiles: successful answers only (`error IS NULL`); a failed or
 *    cancelled answer's time says nothing about answering. First-token times: those that streamed text;
 *  - errors.rate: failed interactions over all interactions in the window (0 when none);
 *  - tokens: sums over every interaction (failed ones recorded 0);
 *  - percentiles: nearest rank over every value in the window, exact.
 * Windows and buckets: see analytics.buckets.ts.
 */
import { NotFoundError } from '../../errors.js';
import type { Actor } from '../../core/auth/actor.js';
import type { AuditEntry } from '../../core/audit/audit.js';
import type { ChannelExists } from '../../lib/channel-exists.js';
import type { Clock } from '../../lib/clock.js';
import { toSession } from '../../core/chat/sessions.service.js';
import type { PersonaService } from '../../core/personas/personas.service.js';
import { nearestRankPercentiles, type TimeWindow, windowOf } from './analytics.buckets.js';
import type {
  ConversationsReport,
  ExportBody,
  MetricName,
  Overview,
  OverviewQuery,
  PerformanceReport,
  ReportQuery,
  Timeframe,
  VersionsQuery,
  VersionsReport,
  HandoffsReport,
} from './analytics.schemas.js';
import type { AnalyticsStore, Filter } from './analytics.store.js';

/** A handoff as analytics reads it (business/handoffs owns them). */
export interface HandoffFigures {
  id: string;
  session_id: string | null;
  persona_id: string;
  team_id: string;
  status: 'queued' | 'offered' | 'accepted' | 'resolved' | 'returned';
  trigger: string;
  member: string | null;
  created_at: string;
  accepted_at: string | null;
  first_reply_at: string | null;
  ended_at: string | null;
  ended_by: string | null;
}

export interface AnalyticsServiceDeps {
  store: AnalyticsStore;
  personas: PersonaService;
  channelExists: ChannelExists;
  clock: Clock;
  /** The handoffs opened in a range, oldest first. */
  handoffsIn?: (workspaceId: string, lo: string, hi: string) => Promise<HandoffFigures[]>;
  /** Writes an audit event (an export changes nothing stored: the event is its only write). */
  audit?: (actor: Actor, entry: AuditEntry) => Promise<void>;
}

const since = (from: string, to: string | null) => (to === null ? null : Date.parse(to) - Date.parse(from));

/** Average and nearest-rank p50/p95 of the durations that exist (ms). */
function durationsOf(values: Array<number | null>) {
  const known = values.filter((v): v is number => v !== null);
  const [p50, p95] = nearestRankPercentiles(known, [0.5, 0.95]);
  return { avg: known.length > 0 ? Math.round(known.reduce((a, b) => a + b, 0) / known.length) : null, p50: p50 ?? null, p95: p95 ?? null };
}

const RECENT_SESSIONS = 10;
const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits;

/** An export: its columns in order, its rows in batches (oldest first) and the file's name. */
export interface ExportFile {
  columns: string[];
  batches: AsyncIterable<Array<Record<string, unknown>>>;
  filename: string;
}

export const EXTENSIONS = { csv: 'csv', json: 'json', ndjson: 'ndjson' } as const;

export function createAnalyticsService(deps: AnalyticsServiceDeps) {
  const { store, personas, channelExists, clock, handoffsIn } = deps;
  /** The filter of a request, its ids checked: an unknown persona or channel → 404. */
  async function filterOf(workspaceId: string, query: { personaId?: string | undefined; channelId?: string | undefined }): Promise<Filter> {
    if (query.personaId !== undefined) await personas.get(workspaceId, query.personaId);
    if (query.channelId !== undefined && !(await channelExists(workspaceId, query.channelId))) throw new NotFoundError('Channel', query.channelId);
    return { workspaceId, personaId: query.personaId, channelId: query.channelId };
  }

  const windowFor = (timeframe: Timeframe) => windowOf(clock.now(), timeframe);

  async function metricsOf(filter: Filter, w: TimeWindow, metrics: MetricName[]): Promise<Overview['metrics']> {
    const out: Overview['metrics'] = {};
    const wants = (m: MetricName) => metrics.includes(m);
    if (wants('response_time')) {
      const { totals: buckets, latencies } = await store.answerTotals(filter, w.buckets);
      const answers = buckets.reduce((a, b) => a + b.answers, 0);
      const latencySum = buckets.reduce((a, b) => a + b.latencySum, 0);
      const [p50, p95] = nearestRankPercentiles(latencies, [0.5, 0.95]);
      if (wants('conversations')) {
        const series = buckets.map((b, i) => ({ start: w.buckets[i]!.start, value: b.conversations }));
        out.conversations = { total: series.reduce((a, p) => a + p.value, 0), series };
      }
      out.response_time = {
        avgMs: answers > 0 ? Math.round(latencySum / answers) : null,
        p50Ms: p50 ?? null,
        p95Ms: p95 ?? null,
        series: buckets.map((b, i) => ({ start: w.buckets[i]!.start, value: b.answers > 0 ? Math.round(b.latencySum / b.answers) : null })),
      };
    } else if (wants('conversations')) {
      const series = (await store.conversationCounts(filter, w.buckets)).map((value, i) => ({ start: w.buckets[i]!.start, value }));
      out.conversations = { total: series.reduce((a, p) => a + p.value, 0), series };
    }
    if (wants('satisfaction')) {
      const buckets = await store.ratingTotals(filter, w.buckets);
      const count = buckets.reduce((a, b) => a + b.count, 0);
      const sum = buckets.reduce((a, b) => a + b.sum, 0);
      out.satisfaction = {
        average: count > 0 ? round(sum / count, 2) : null,
        count,
        series: buckets.map((b, i) => ({ start: w.buckets[i]!.start, value: b.count > 0 ? round(b.sum / b.count, 2) : null })),
      };
    }
    // The order of API.md §8, whatever order the query named them in.
    return Object.fromEntries(Object.entries(out).sort(([a], [b]) => metricsOrder(a) - metricsOrder(b))) as Overview['metrics'];
  }
  const metricsOrder = (m: string) => ['conversations', 'satisfaction', 'response_time'].indexOf(m);

  return {
    /** GET /business/analytics. */
    async overview(workspaceId: string, query: OverviewQuery): Promise<Overview> {
      const filter = await filterOf(workspaceId, query);
      const w = windowFor(query.timeframe);
      return { timeframe: w.timeframe, from: w.from, to: w.to, metrics: await metricsOf(filter, w, query.metrics) };
    },

    /** GET /business/analytics/conversations. */
    async conversations(workspaceId: string, query: ReportQuery): Promise<ConversationsReport> {
      const filter = await filterOf(workspaceId, query);
      const w = windowFor(query.timeframe);
      const series = (await store.conversationCounts(filter, w.buckets)).map((value, i) => ({ start: w.buckets[i]!.start, value }));
      return {
        timeframe: w.timeframe,
        total: series.reduce((a, p) => a + p.value, 0),
        series,
        byPersona: (await store.conversationsBy(filter, w, 'persona')).map(([personaId, count]) => ({ personaId, count })),
        byChannel: (await store.conversationsBy(filter, w, 'channel')).map(([channelId, count]) => ({ channelId, count })),
        recent: (await store.recentSessions(filter, w, RECENT_SESSIONS)).map(toSession),
      };
    },

    /** GET /business/analytics/performance. */
    /** Handoff rate and times to accept, to the first human reply and to resolution, per team and persona. */
    async handoffs(workspaceId: string, query: { timeframe: Timeframe }): Promise<HandoffsReport> {
      const w = windowFor(query.timeframe);
      const [rows, perPersona] = await Promise.all([handoffsIn ? handoffsIn(workspaceId, w.lo, w.hi) : [], store.conversationsBy({ workspaceId }, w, 'persona')]);
      const conversationsOf = new Map(perPersona);
      const conversations = perPersona.reduce((a, [, n]) => a + n, 0);
      const figures = (of: HandoffFigures[]) => ({
        firstReplyMs: durationsOf(of.map((h) => since(h.created_at, h.first_reply_at))),
        resolutionMs: durationsOf(of.map((h) => since(h.created_at, h.ended_at))),
      });
      const group = (key: (h: HandoffFigures) => string) => {
        const out = new Map<string, HandoffFigures[]>();
        for (const h of rows) out.set(key(h), [...(out.get(key(h)) ?? []), h]);
        return [...out.entries()].sort(([a, x], [b, y]) => y.length - x.length || (a < b ? -1 : 1));
      };
      const byStatus = { queued: 0, offered: 0, accepted: 0, resolved: 0, returned: 0 };
      for (const h of rows) byStatus[h.status]++;
      return {
        timeframe: w.timeframe,
        from: w.from,
        to: w.to,
        handoffs: rows.length,
        conversations,
        rate: conversations > 0 ? round(rows.length / conversations, 4) : 0,
        byStatus,
        acceptMs: durationsOf(rows.map((h) => since(h.created_at, h.accepted_at))),
        ...figures(rows),
        byTeam: group((h) => h.team_id).map(([teamId, of]) => ({ teamId, handoffs: of.length, ...figures(of) })),
        byPersona: group((h) => h.persona_id).map(([personaId, of]) => {
          const n = conversationsOf.get(personaId) ?? 0;
          return { personaId, handoffs: of.length, conversations: n, rate: n > 0 ? round(of.length / n, 4) : 0, ...figures(of) };
        }),
      };
    },

    /** One persona's figures per version that answered in the timeframe, newest version first. */
    async versions(workspaceId: string, query: VersionsQuery): Promise<VersionsReport> {
      await personas.get(workspaceId, query.personaId);
      const w = windowFor(query.timeframe);
      const rows = await store.byVersion(workspaceId, query.personaId, w);
      rows.sort((a, b) => (b.version ?? 0) - (a.version ?? 0));
      return {
        timeframe: w.timeframe,
        from: w.from,
        to: w.to,
        personaId: query.personaId,
        versions: rows.map((r) => {
          const ok = r.all - r.errors;
          const [p50, p95] = nearestRankPercentiles(r.latencies, [0.5, 0.95]);
          return {
            version: r.version,
            answers: r.all,
            errors: { count: r.errors, rate: r.all > 0 ? round(r.errors / r.all, 4) : 0 },
            satisfaction: { average: r.rated > 0 ? round(r.ratingSum / r.rated, 2) : null, count: r.rated },
            latency: { avgMs: ok > 0 ? Math.round(r.latencySum / ok) : null, p50Ms: p50 ?? null, p95Ms: p95 ?? null },
            tokens: { prompt: r.promptTokens, completion: r.completionTokens },
          };
        }),
      };
    },

    async performance(workspaceId: string, query: ReportQuery): Promise<PerformanceReport> {
      const filter = await filterOf(workspaceId, query);
      const w = windowFor(query.timeframe);
      // Two scans of the window, at once: on PostgreSQL each runs on its own connection.
      const [t, tools] = await Promise.all([store.performanceTotals(filter, w, { latency: [0.5, 0.95, 0.99], firstToken: [0.5, 0.95] }), store.toolCalls(filter, w)]);
      const [p50, p95, p99] = t.latency;
      const [t50, t95] = t.firstToken;
      const byTool = tools.map(([name, calls, failures]) => ({ name, calls, failures }));
      return {
        timeframe: w.timeframe,
        latency: { p50Ms: p50 ?? null, p95Ms: p95 ?? null, p99Ms: p99 ?? null },
        firstTokenMs: { p50Ms: t50 ?? null, p95Ms: t95 ?? null },
        tokens: { prompt: t.promptTokens, completion: t.completionTokens },
        errors: { count: t.errors, rate: t.all > 0 ? round(t.errors / t.all, 4) : 0 },
        tools: { calls: byTool.reduce((a, b) => a + b.calls, 0), failures: byTool.reduce((a, b) => a + b.failures, 0), byTool },
      };
    },

    /** POST /business/analytics/export: the rows of one dataset over the window, oldest first. */
    async export(actor: Actor, body: ExportBody): Promise<ExportFile> {
      const workspaceId = actor.workspaceId;
      const w = windowFor(body.timeframe);
      // Who exported what (the dataset; the format and window are not changes): before any row is read.
      await deps.audit?.(actor, { action: 'analytics.export', target: { type: 'analytics', id: body.dataset } });
      const filename = `switchboard-${body.dataset}-${w.to.slice(0, 10)}.${EXTENSIONS[body.format]}`;
      if (body.dataset === 'messages') {
        return { columns: MESSAGE_COLUMNS, batches: store.messageRows(workspaceId, w) as ExportFile['batches'], filename };
      }
      if (body.dataset === 'answers') {
        return { columns: ANSWER_COLUMNS, batches: store.answerRows(workspaceId, w) as ExportFile['batches'], filename };
      }
      if (body.dataset === 'handoffs') {
        const rows = handoffsIn ? await handoffsIn(workspaceId, w.lo, w.hi) : [];
        const records = rows.map((h) => ({
          createdAt: h.created_at,
          handoffId: h.id,
          sessionId: h.session_id,
          personaId: h.persona_id,
          teamId: h.team_id,
          trigger: h.trigger,
          status: h.status,
          member: h.member,
          acceptedAt: h.accepted_at,
          firstReplyAt: h.first_reply_at,
          endedAt: h.ended_at,
          endedBy: h.ended_by,
          acceptMs: since(h.created_at, h.accepted_at),
          firstReplyMs: since(h.created_at, h.first_reply_at),
          resolutionMs: since(h.created_at, h.ended_at),
        }));
        return { columns: HANDOFF_COLUMNS, batches: (async function* () { yield records; })(), filename };
      }
      if (body.dataset === 'conversations') {
        return { columns: CONVERSATION_COLUMNS, batches: store.conversationRows(workspaceId, w) as ExportFile['batches'], filename };
      }
      const metrics = await metricsOf({ workspaceId }, w, body.metrics);
      const rows = w.buckets.map((b, i) => {
        const row: Record<string, unknown> = { start: b.start };
        for (const m of body.metrics) row[m] = metrics[m]!.series[i]!.value;
        return row;
      });
      return { columns: ['start', ...body.metrics], batches: (async function* () { yield rows; })(), filename };
    },
  };
}

/** `messages`: the text of the conversations; the last four columns are the answer's, empty on user messages. */
export const MESSAGE_COLUMNS = [
  'createdAt', 'sessionId', 'messageId', 'role', 'content', 'personaId', 'abTestId', 'variant', 'channelId', 'userId',
  'latencyMs', 'promptTokens', 'completionTokens', 'rating',
];
/** `answers`: one row per answer (interaction), its figures and no text. */
export const ANSWER_COLUMNS = [
  'startedAt', 'sessionId', 'personaId', 'personaVersion', 'abTestId', 'variant', 'channelId', 'userId', 'model',
  'latencyMs', 'ttftMs', 'promptTokens', 'completionTokens', 'toolCalls', 'error', 'rating',
];
/** `handoffs`: one row per handoff, its states and times. */
export const HANDOFF_COLUMNS = [
  'createdAt', 'handoffId', 'sessionId', 'personaId', 'teamId', 'trigger', 'status', 'member', 'acceptedAt', 'firstReplyAt', 'endedAt', 'endedBy',
  'acceptMs', 'firstReplyMs', 'resolutionMs',
];
export const CONVERSATION_COLUMNS = [
  'sessionId', 'personaId', 'abTestId', 'variant', 'channelId', 'userId', 'title', 'messageCount', 'createdAt', 'lastMessageAt',
  'answers', 'errors', 'avgLatencyMs', 'promptTokens', 'completionTokens', 'averageRating',
];

export type AnalyticsService = ReturnType<typeof createAnalyticsService>;
