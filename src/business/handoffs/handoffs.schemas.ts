import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';

const status = z.enum(['queued', 'offered', 'accepted', 'resolved', 'returned']);

export const handoffSchema = z
  .object({
    id: z.string(),
    sessionId: z.string().nullable().describe('The conversation; null once its session was deleted (its numbers stay).'),
    personaId: z.string(),
    teamId: z.string(),
    status: status.describe('`queued` (nobody available), `offered` (to `member`, until `offerUntil`), `accepted` (by `member`), then `resolved` or `returned` (to the persona).'),
    trigger: z.enum(['user', 'tool', 'rule', 'api']).describe('`user` asked for a person (`/human`), the persona called `handoff` (`tool`), a `rule` matched (keyword, low rating), or the `api`.'),
    reason: z.string(),
    member: z.string().nullable().describe('The member it is offered to, or who accepted it.'),
    offerUntil: z.string().nullable().describe('When the offer goes to the next member.'),
    offers: z.number().int().describe('Offers made so far.'),
    nextAvailableAt: z.string().nullable().describe('Queued: when the team is next available (null: when a member becomes available).'),
    createdAt: z.string(),
    acceptedAt: z.string().nullable(),
    firstReplyAt: z.string().nullable(),
    endedAt: z.string().nullable(),
    endedBy: z.string().nullable().describe('The member who handed it back or resolved it, or `api`.'),
  })
  .meta({ id: 'Handoff' });

export const handoffMessageSchema = z
  .object({
    id: z.string(),
    role: z.enum(['user', 'assistant']),
    content: z.string(),
    author: z.string().nullable().describe('null: the user or the persona; `human:<email>`: a team member; `system`: a notice.'),
    createdAt: z.string(),
  })
  .meta({ id: 'HandoffMessage' });

export const handoffDetailSchema = handoffSchema.extend({ messages: z.array(handoffMessageSchema).describe('The conversation so far (the latest 50), oldest first.') }).meta({ id: 'HandoffWithMessages' });

export const openHandoffSchema = z.strictObject({ reason: z.string().trim().min(1).max(1000).default('Handed over through the API.') });

const member = z
  .string()
  .trim()
  .min(1)
  .max(320)
  .optional()
  .describe(
    'The team member acting, by e-mail or user id. Absent: you (the signed-in person, or the person the key belongs to). Naming someone else needs `admin` (else 403) and is recorded in the audit log (`onBehalfOf`); a key that belongs to no person must name one.',
  );
export const acceptSchema = z.strictObject({ member });
export const replySchema = z.strictObject({ member, text: z.string().trim().min(1).max(32_000) });
export const endSchema = z.strictObject({
  member: member.describe(
    'The team member acting, by e-mail or user id. Absent: you (the signed-in person, or the person the key belongs to); a key that belongs to no person: the API (`endedBy: "api"`). Naming someone else needs `admin` (else 403).',
  ),
});

export const HANDOFF_STATUSES = status.options;

/** `?status=queued,offered`: one status or several, comma-separated. */
const statusList = z
  .string()
  .max(100)
  .optional()
  .transform((value, ctx) => {
    if (value === undefined) return undefined;
    const names = value.split(',').map((s) => s.trim());
    const unknown = names.filter((n) => !(HANDOFF_STATUSES as readonly string[]).includes(n));
    if (unknown.length > 0) {
      ctx.addIssue({ code: 'custom', message: `unknown status ${unknown.map((n) => JSON.stringify(n)).join(', ')}; choose from ${HANDOFF_STATUSES.join(', ')}` });
      return z.NEVER;
    }
    return HANDOFF_STATUSES.filter((s) => names.includes(s));
  })
  .describe(`One status or several, comma-separated (\`queued,offered\`: what waits for a member): ${HANDOFF_STATUSES.join(', ')}.`);

const listFilters = { teamId: z.string().optional(), member: z.string().max(320).optional() };

export const listHandoffsQuerySchema = pageQuerySchema.extend({ status: statusList, ...listFilters }).strict();

/** The MCP tool's filters: `status` as a list. */
export const listHandoffsInputSchema = z.object({
  status: z.array(status).max(HANDOFF_STATUSES.length).optional().describe('Only these statuses (`["queued", "offered"]`: what waits for a member).'),
  ...listFilters,
});

export type Handoff = z.infer<typeof handoffSchema>;
export type HandoffMessage = z.infer<typeof handoffMessageSchema>;
