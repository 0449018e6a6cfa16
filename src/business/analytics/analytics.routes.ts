import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { sendDownload } from '../../http/download.js';
import { withErrors } from '../../http/openapi.js';
import { CONTENT_TYPES, encodeRows } from './analytics.export.js';
import {
  conversationsReportSchema,
  exportBodySchema,
  overviewQuerySchema,
  overviewSchema,
  performanceReportSchema,
  reportQuerySchema,
  versionsQuerySchema,
  versionsReportSchema,
  handoffsQuerySchema,
  handoffsReportSchema,
} from './analytics.schemas.js';

const exportFile = {
  description:
    'The file, streamed, with `Content-Disposition: attachment; filename="switchboard-<dataset>-<YYYY-MM-DD>.<ext>"`: CSV (RFC 4180, header row first; a text cell starting with `=`, `+`, `-`, `@`, tab or CR is prefixed with `\'` so no spreadsheet runs it as a formula; null is an empty cell), one JSON array, or NDJSON (one object a line); every record has every column of its dataset. Rows oldest first (messages: by `createdAt`, ties in the order written).',
  content: {
    'text/csv': { schema: z.string() },
    'application/json': { schema: z.array(z.record(z.string(), z.unknown())) },
    'application/x-ndjson': { schema: z.string() },
  },
};

/** API.md §8: analytics. */
export function analyticsRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const analytics = ctx.services.analytics;
  const tags = ['analytics'];
  return async (app) => {
    app.get(
      '/business/analytics',
      {
        schema: {
          tags,
          summary: 'Conversations, satisfaction and response time over a timeframe, with series',
          querystring: overviewQuerySchema,
          response: withErrors({ 200: overviewSchema }, [404]),
        },
      },
      async (request) => analytics.overview(actorOf(request).workspaceId, request.query),
    );

    app.get(
      '/business/analytics/conversations',
      {
        schema: {
          tags,
          summary: 'Conversations over a timeframe: series, per persona and channel, the latest sessions',
          querystring: reportQuerySchema,
          response: withErrors({ 200: conversationsReportSchema }, [404]),
        },
      },
      async (request) => analytics.conversations(actorOf(request).workspaceId, request.query),
    );

    app.get(
      '/business/analytics/performance',
      {
        schema: {
          tags,
          summary: 'Latency and first-token percentiles, tokens, errors and tool calls over a timeframe',
          querystring: reportQuerySchema,
          response: withErrors({ 200: performanceReportSchema }, [404]),
        },
      },
      async (request) => analytics.performance(actorOf(request).workspaceId, request.query),
    );

    app.get(
      '/business/analytics/versions',
      {
        schema: {
          tags,
          summary: 'One persona’s answers, errors, satisfaction, latency and tokens per version',
          description: 'Every answer records the persona version that gave it; versions that did not answer in the timeframe are left out.',
          querystring: versionsQuerySchema,
          response: withErrors({ 200: versionsReportSchema }, [404]),
        },
      },
      async (request) => analytics.versions(actorOf(request).workspaceId, request.query),
    );

    app.get(
      '/business/analytics/handoffs',
      {
        schema: {
          tags,
          summary: 'Handoffs to people: rate, times to accept, to the first human reply and to resolution, per team and persona',
          querystring: handoffsQuerySchema,
          response: withErrors({ 200: handoffsReportSchema }),
        },
      },
      async (request) => analytics.handoffs(actorOf(request).workspaceId, request.query),
    );

    app.post(
      '/business/analytics/export',
      {
        // Only reads: the read scope is enough, and nothing is created, so no Idempotency-Key handling.
        config: { scope: 'read' },
        schema: { tags, summary: 'Export conversations, their messages, answers or the metric series as CSV, JSON or NDJSON', body: exportBodySchema, response: withErrors({ 200: exportFile }) },
      },
      async (request, reply) => {
        const file = await analytics.export(actorOf(request), request.body);
        await sendDownload(request, reply, { contentType: CONTENT_TYPES[request.body.format], filename: file.filename }, encodeRows(request.body.format, file.columns, file.batches));
      },
    );
  };
}
