import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';

/** What `GET /audit` and `GET /audit/export` filter on (API.md §14). */
export const auditFilterSchema = z.object({
  actor: z.string().max(200).optional().describe('An actor id: a user (`usr_…`), key (`key_…`), OAuth grant or `system`.'),
  action: z.string().max(100).optional().describe('An action, e.g. `persona.update`.'),
  targetType: z.string().max(100).optional().describe('The target’s type, e.g. `persona`.'),
  targetId: z.string().max(200).optional().describe('The target’s id.'),
  since: z.iso.datetime({ offset: true }).optional().describe('ISO-8601: events at or after this instant.'),
  until: z.iso.datetime({ offset: true }).optional().describe('ISO-8601: events before this instant.'),
});

export type AuditFilter = z.output<typeof auditFilterSchema>;

export const listAuditQuerySchema = z.strictObject({ ...pageQuerySchema.shape, ...auditFilterSchema.shape });

export const AUDIT_EXPORT_FORMATS = ['ndjson', 'csv'] as const;
export type AuditExportFormat = (typeof AUDIT_EXPORT_FORMATS)[number];

export const exportAuditQuerySchema = z.strictObject({
  ...auditFilterSchema.shape,
  format: z.enum(AUDIT_EXPORT_FORMATS).describe('`ndjson` (one event a line) or `csv` (header row first).'),
});

export const auditEventSchema = z
  .object({
    id: z.string().describe('`aud_…`'),
    at: z.string().describe('ISO-8601'),
    workspaceId: z.string(),
    actor: z.object({
      type: z.enum(['user', 'key', 'oauth', 'channel', 'system']),
      id: z.string().describe('The user, key, OAuth grant or channel; `system` for timers.'),
      name: z.string(),
    }),
    onBehalfOf: z.string().optional().describe('The member an admin acted for.'),
    action: z.string().describe('`<target type>.<verb>`, e.g. `persona.update`; `request.denied` for a 403.'),
    target: z.object({ type: z.string(), id: z.string().nullable() }),
    outcome: z.enum(['success', 'denied']),
    requestId: z.string().nullable(),
    ip: z.string().nullable(),
    userAgent: z.string().nullable(),
    changes: z.array(z.string()).optional().describe('The names of the fields changed, never their values.'),
  })
  .meta({ id: 'AuditEvent' });

export type AuditEvent = z.infer<typeof auditEventSchema>;
