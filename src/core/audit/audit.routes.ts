import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../../context.js';
import { actorOf } from '../../http/auth-hooks.js';
import { sendDownload } from '../../http/download.js';
import { pageOf, withErrors } from '../../http/openapi.js';
import { encodeRows } from '../../business/analytics/analytics.export.js';
import { auditEventSchema, exportAuditQuerySchema, listAuditQuerySchema } from './audit.schemas.js';
import { AUDIT_COLUMNS } from './audit.service.js';

const exportFile = {
  description:
    'Every matching event, newest first, streamed with `Content-Disposition: attachment; filename="switchboard-audit-<YYYY-MM-DD>.<ext>"`: NDJSON (one `AuditEvent` a line) or CSV (RFC 4180, header row first, the actor and target flattened into columns, `changes` space-separated; a text cell starting with `=`, `+`, `-`, `@`, tab or CR is prefixed with `\'` so no spreadsheet runs it as a formula).',
  content: { 'application/x-ndjson': { schema: z.string() }, 'text/csv': { schema: z.string() } },
};

/** API.md §14: the audit log, read-only (no route edits or deletes an event). */
export function auditRoutes(ctx: AppContext): FastifyPluginAsyncZod {
  const audit = ctx.services.audit;
  const tags = ['audit'];
  return async (app) => {
    app.get(
      '/audit',
      {
        config: { role: 'admin' },
        schema: {
          tags,
          summary: 'The audit log: who changed what, and refusals, newest first',
          querystring: listAuditQuerySchema,
          response: withErrors({ 200: pageOf(auditEventSchema) }),
        },
      },
      async (request) => {
        const { limit, cursor, ...filter } = request.query;
        return audit.list(actorOf(request).workspaceId, filter, { limit, cursor });
      },
    );

    app.get(
      '/audit/export',
      {
        config: { role: 'admin' },
        schema: { tags, summary: 'Export the audit log (every matching event) as NDJSON or CSV', querystring: exportAuditQuerySchema, response: withErrors({ 200: exportFile }) },
      },
      async (request, reply) => {
        const { format, ...filter } = request.query;
        const workspaceId = actorOf(request).workspaceId;
        const filename = `switchboard-audit-${ctx.clock.now().toISOString().slice(0, 10)}.${format}`;
        const chunks =
          format === 'csv'
            ? encodeRows('csv', [...AUDIT_COLUMNS], audit.export(workspaceId, filter))
            : (async function* () {
                for await (const events of audit.exportEvents(workspaceId, filter)) yield events.map((e) => `${JSON.stringify(e)}\n`).join('');
              })();
        await sendDownload(request, reply, { contentType: format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8', filename }, chunks);
      },
    );
  };
}
