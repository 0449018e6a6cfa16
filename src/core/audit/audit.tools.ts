/** MCP tool of the audit log (API.md §14): `GET /audit` through the same service, admin and up. */
import { z } from 'zod';
import { pageInput, pageOutput } from '../../mcp/common-schemas.js';
import { defineTool, type McpFeature, READ_ONLY } from '../../mcp/tool-definition.js';
import { auditEventSchema, auditFilterSchema } from './audit.schemas.js';

export const auditFeature: McpFeature = {
  tools: [
    defineTool({
      name: 'list_audit_events',
      title: 'Read the audit log',
      description:
        'Lists audit events, newest first: who changed what (`action` `<target type>.<verb>`, e.g. `persona.update`, `member.role`) and who was refused (`request.denied`). ' +
        'Filter by `actor` (usr_…, key_…, an OAuth grant, `system`), `action`, `targetType`, `targetId`, `since` (inclusive) and `until` (exclusive). ' +
        'Events name the fields a change set, never their values. Pass `nextCursor` back as `cursor` for more. Needs the admin role.',
      input: z.strictObject({ ...auditFilterSchema.shape, ...pageInput }),
      output: pageOutput(auditEventSchema),
      annotations: READ_ONLY,
      scope: 'admin',
      run: ({ ctx, caller }, { limit, cursor, ...filter }) => ctx.services.audit.list(caller.workspaceId, filter, { limit, cursor }),
    }),
  ],
};
