/** MCP tool of analytics (API.md §10): GET /business/analytics through the same service and rules. */
import { defineTool, type McpFeature, READ_ONLY } from '../../mcp/tool-definition.js';
import { overviewQuerySchema, overviewSchema } from './analytics.schemas.js';

export const analyticsFeature: McpFeature = {
  tools: [
    defineTool({
      name: 'get_analytics',
      title: 'Get analytics',
      description:
        'Conversations (sessions opened), satisfaction (average 1–5 feedback rating) and response time (average, p50, p95 of successful answers) of this workspace over `timeframe` (`<n>h`, `<n>d` or `<n>w`, at most 366 days, default 7d), each with a series: hourly buckets up to 48h, daily beyond. `metrics` picks a comma-separated subset; `personaId` or `channelId` narrow it to one persona or channel.',
      input: overviewQuerySchema,
      output: overviewSchema,
      annotations: READ_ONLY,
      scope: 'read',
      run: ({ ctx, caller }, query) => ctx.services.analytics.overview(caller.workspaceId, query),
    }),
  ],
};
