/** API.md §8 analytics: the query, the three reports and the export body (shared by HTTP and MCP). */
import { z } from 'zod';
import { sessionSchema } from '../../core/chat/chat.schemas.js';

export const METRICS = ['conversations', 'satisfaction', 'response_time'] as const;
export type MetricName = (typeof METRICS)[number];

/** The longest timeframe (API.md §8). */
export const MAX_TIMEFRAME_DAYS = 366;
const UNIT_MS = { h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 } as const;

/** `<n>h|<n>d|<n>w` → milliseconds; n ≥ 1 and at most 366 days. */
export const timeframeSchema = z
  .string()
  .default('7d')
  .transform((value, ctx) => {
    const m = /^([1-9][0-9]{0,5})([hdw])$/.exec(value);
    if (!m) {
      ctx.addIssue({ code: 'custom', message: 'must be <n>h, <n>d or <n>w with n ≥ 1 (e.g. 24h, 7d, 4w)' });
      return z.NEVER;
    }
    const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
    if (ms > MAX_TIMEFRAME_DAYS * UNIT_MS.d) {
      ctx.addIssue({ code: 'custom', message: `must be at most ${MAX_TIMEFRAME_DAYS} days` });
      return z.NEVER;
    }
    return { label: value, ms };
  })
  .describe('`<n>h`, `<n>d` or `<n>w`, at most 366 days; default 7d. Up to 48h the series is hourly, beyond daily.');

export type Timeframe = { label: string; ms: number };

/** Comma-separated subset of the metrics; default all. */
export const metricsSchema = z
  .string()
  .optional()
  .transform((value, ctx): MetricName[] => {
    if (value === undefined) return [...METRICS];
    const names = value.split(',').map((s) => s.trim());
    const unknown = names.filter((n) => !(METRICS as readonly string[]).includes(n));
    if (unknown.length > 0) {
      ctx.addIssue({ code: 'custom', message: `unknown metric ${unknown.map((n) => JSON.stringify(n)).join(', ')}; choose from ${METRICS.join(', ')}` });
      return z.NEVER;
    }
    return METRICS.filter((m) => names.includes(m));
  })
  .describe(`Comma-separated subset of ${METRICS.join(', ')}; default all.`);

const filterFields = {
  personaId: z.string().optional().describe('Only this persona (404 when it is not one of the workspace).'),
  channelId: z.string().optional().describe('Only this channel (404 when it is not one of the workspace).'),
};

export const overviewQuerySchema = z.strictObject({ timeframe: timeframeSchema, metrics: metricsSchema, ...filterFields });
export const reportQuerySchema = z.strictObject({ timeframe: timeframeSchema, ...filterFields });

export const versionsQuerySchema = z.strictObject({
  timeframe: timeframeSchema,
  personaId: z.string().describe('The persona whose versions are compared (404 when it is not one of the workspace).'),
});

export type OverviewQuery = z.output<typeof overviewQuerySchema>;
export type VersionsQuery = z.output<typeof versionsQuerySchema>;
export type ReportQuery = z.output<typeof reportQuerySchema>;

const count = z.number().int();
const ms = z.number().nullable().describe('Milliseconds; null when nothing was measured.');
export const seriesSchema = z
  .array(z.object({ start: z.string().describe('Bucket start (UTC, aligned to the hour or day).'), value: z.number().nullable() }))
  .describe('One point per bucket, empty buckets included: hourly up to 48h, daily beyond.');

export const overviewSchema = z
  .object({
    timeframe: z.string(),
    from: z.string().describe('now − timeframe (inclusive).'),
    to: z.string().describe('now (inclusive).'),
    metrics: z.object({
      conversations: z.object({ total: count, series: seriesSchema }).optional().describe('Sessions opened in the timeframe; deleted ones still count.'),
      satisfaction: z
        .object({ average: z.number().nullable(), count, series: seriesSchema })
        .optional()
        .describe('Feedback ratings 1–5 given in the timeframe: their average (null when none) and number; series value null where none.'),
      response_time: z
        .object({ avgMs: ms, p50Ms: ms, p95Ms: ms, series: seriesSchema })
        .optional()
        .describe('Latency of successful answers (failed ones are left out): average and nearest-rank percentiles; series: average per bucket, null where none.'),
    }),
  })
  .meta({ id: 'AnalyticsOverview' });

export const conversationsReportSchema = z
  .object({
    timeframe: z.string(),
    total: count,
    series: seriesSchema,
    byPersona: z.array(z.object({ personaId: z.string(), count })).describe('Most conversations first.'),
    byChannel: z.array(z.object({ channelId: z.string(), count })).describe('Most conversations first; conversations without a channel are not listed.'),
    recent: z.array(sessionSchema).describe('The latest 10 sessions opened in the timeframe that still exist, newest first.'),
  })
  .meta({ id: 'AnalyticsConversations' });

const durations = z.object({ avg: z.number().nullable(), p50: z.number().nullable(), p95: z.number().nullable() });

export const handoffsReportSchema = z
  .object({
    timeframe: z.string(),
    from: z.string(),
    to: z.string(),
    handoffs: z.number().int().describe('Handoffs opened in the timeframe.'),
    conversations: z.number().int().describe('Conversations opened in the timeframe.'),
    rate: z.number().describe('Handoffs over conversations; 0 when there were none.'),
    byStatus: z.record(z.enum(['queued', 'offered', 'accepted', 'resolved', 'returned']), z.number().int()),
    acceptMs: durations.describe('From the handoff to a member accepting it.'),
    firstReplyMs: durations.describe('From the handoff to the first reply of a person.'),
    resolutionMs: durations.describe('From the handoff to its end (resolved or returned).'),
    byTeam: z.array(z.object({ teamId: z.string(), handoffs: z.number().int(), firstReplyMs: durations, resolutionMs: durations })).describe('Most handoffs first.'),
    byPersona: z
      .array(z.object({ personaId: z.string(), handoffs: z.number().int(), conversations: z.number().int(), rate: z.number(), firstReplyMs: durations, resolutionMs: durations }))
      .describe('Most handoffs first.'),
  })
  .meta({ id: 'AnalyticsHandoffsReport' });

export const handoffsQuerySchema = z.strictObject({ timeframe: timeframeSchema });

export const versionsReportSchema = z
  .object({
    timeframe: z.string(),
    from: z.string(),
    to: z.string(),
    personaId: z.string(),
    versions: z
      .array(
        z.object({
          version: z.number().int().nullable().describe('null: answers recorded before persona versions were kept.'),
          answers: z.number().int().describe('Answers given, failed ones included.'),
          errors: z.object({ count: z.number().int(), rate: z.number() }),
          satisfaction: z.object({ average: z.number().nullable(), count: z.number().int().describe('Rated answers (the latest rating of each).') }),
          latency: z.object({ avgMs: z.number().nullable(), p50Ms: z.number().nullable(), p95Ms: z.number().nullable() }).describe('Successful answers only (nearest rank).'),
          tokens: z.object({ prompt: z.number().int(), completion: z.number().int() }),
        }),
      )
      .describe('Newest version first; only versions that answered in the timeframe.'),
  })
  .meta({ id: 'AnalyticsVersionsReport' });

export const performanceReportSchema = z
  .object({
    timeframe: z.string(),
    latency: z.object({ p50Ms: ms, p95Ms: ms, p99Ms: ms }).describe('Successful answers only (nearest rank).'),
    firstTokenMs: z.object({ p50Ms: ms, p95Ms: ms }).describe('Successful answers that streamed text.'),
    tokens: z.object({ prompt: count, completion: count }).describe('Sums of the answers’ usage.'),
    errors: z.object({ count, rate: z.number().describe('Failed answers over all answers, 0 when none.') }),
    tools: z.object({
      calls: count,
      failures: count,
      byTool: z.array(z.object({ name: z.string().describe('`<toolName>.<action>`'), calls: count, failures: count })).describe('Most calls first.'),
    }),
  })
  .meta({ id: 'AnalyticsPerformance' });

export const EXPORT_DATASETS = ['conversations', 'messages', 'answers', 'handoffs', 'metrics'] as const;
export const EXPORT_FORMATS = ['csv', 'json', 'ndjson'] as const;
export type ExportDataset = (typeof EXPORT_DATASETS)[number];
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export const exportBodySchema = z.strictObject({
  timeframe: timeframeSchema,
  metrics: metricsSchema.describe('For the `metrics` dataset: its columns (default all). Other datasets ignore it.'),
  dataset: z
    .enum(EXPORT_DATASETS)
    .describe(
      'conversations: one row per session opened in the window that still exists, with its numbers. ' +
        'messages: the conversations’ text, one row per user message and answer written in the window (tool rounds left out): ' +
        '`createdAt, sessionId, messageId, role, content, personaId, abTestId, variant, channelId, userId`, and on answers ' +
        '`latencyMs, promptTokens, completionTokens, rating` (null, or an empty CSV cell, on user messages; `rating` is the latest feedback on that answer, ' +
        'and feedback sent without a messageId rates the session’s latest answer at that time); userId is the exchange’s; deleted sessions have no messages. ' +
        'answers: one row per answer started in the window, failed ones and those of deleted sessions included, with its figures and no text. ' +
        'handoffs: one row per handoff opened in the window, with its team, member, states and times (to accept, to the first reply, to resolve). ' +
        'metrics: the bucketed series.',
    ),
  format: z.enum(EXPORT_FORMATS),
});
export type ExportBody = z.output<typeof exportBodySchema>;

export type Overview = z.infer<typeof overviewSchema>;
export type ConversationsReport = z.infer<typeof conversationsReportSchema>;
export type PerformanceReport = z.infer<typeof performanceReportSchema>;
export type VersionsReport = z.infer<typeof versionsReportSchema>;
export type HandoffsReport = z.infer<typeof handoffsReportSchema>;
