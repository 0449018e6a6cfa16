import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';
import { isTimeZone } from './availability.js';

export const TEAM_STATUSES = ['available', 'busy', 'offline'] as const;
export const MEMBER_ROLES = ['member', 'lead'] as const;
export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
/** Members in a create body, and in a team at all. */
export const MAX_MEMBERS = 200;
export const MAX_WINDOWS = 50;

const status = z.enum(TEAM_STATUSES);
const role = z.enum(MEMBER_ROLES);

/** Trimmed; compared case-insensitively (stored as first given). */
const email = z.string().trim().max(254).pipe(z.email('must be an e-mail address'));

/** `HH:MM`, 00:00–23:59; an `end` may also be `24:00` (until midnight). */
const hhmm = /^([01]\d|2[0-3]):[0-5]\d$/;

export const windowSchema = z
  .strictObject({
    day: z.enum(WEEKDAYS).describe('Local weekday in the team’s time zone.'),
    start: z.string().regex(hhmm, 'must be HH:MM (00:00–23:59)').describe('Local start, inclusive.'),
    end: z
      .string()
      .refine((s) => hhmm.test(s) || s === '24:00', 'must be HH:MM (00:01–24:00)')
      .describe('Local end, exclusive; `24:00` means until midnight.'),
  })
  .refine((w) => !hhmm.test(w.start) || w.start < w.end, { message: 'must be after start (split a window that crosses midnight in two)', path: ['end'] })
  .meta({ id: 'TeamWindow' });

const timezone = z
  .string()
  .max(64)
  .refine(isTimeZone, 'must be an IANA time zone name such as "Europe/Berlin" or "UTC"')
  .describe('IANA time zone name.');

/** Lists of e-mails must not name anyone twice (case-insensitively): the later one is refused. */
function noDuplicateEmails<T>(items: T[], emailOf: (item: T) => string, ctx: z.RefinementCtx, suffix: string[] = []) {
  const seen = new Map<string, number>();
  items.forEach((item, i) => {
    const key = emailOf(item).toLowerCase();
    const first = seen.get(key);
    if (first === undefined) seen.set(key, i);
    else ctx.addIssue({ code: 'custom', path: [i, ...suffix], message: `duplicates members.${first}` });
  });
}

/** A person of the workspace: their user id (`usr_…`) or their e-mail (API.md §14). */
const userRef = z.string().trim().min(1).max(254).describe('A user id (`usr_…`) or the e-mail of a member of the workspace.');

export const createTeamSchema = z.strictObject({
  name: z.string().trim().min(1).max(200),
  members: z
    .array(userRef)
    .max(MAX_MEMBERS)
    .superRefine((list, ctx) => noDuplicateEmails(list, (e) => e, ctx))
    .describe(
      'The first members (role `member`, status `available`): user ids or e-mails of members of the workspace (anyone else → 400 naming `members.<i>`); nobody twice. Stored and shown by their e-mail.',
    ),
});

export const updateAvailabilitySchema = z.strictObject({
  status: status.optional(),
  timezone: timezone.optional(),
  weekly: z.array(windowSchema).max(MAX_WINDOWS).optional().describe('Replaces the schedule; `[]` = always.'),
  members: z
    .array(z.strictObject({ email, status }))
    .max(MAX_MEMBERS)
    .superRefine((list, ctx) => noDuplicateEmails(list, (m) => m.email, ctx, ['email']))
    .optional()
    .describe('Status updates of existing members (matched case-insensitively).'),
});

export const addMemberSchema = z
  .strictObject({
    email: email.optional().describe('The e-mail of a member of the workspace (or give `userId`).'),
    userId: z.string().trim().min(1).max(64).optional().describe('The user id (`usr_…`) of a member of the workspace (or give `email`).'),
    role: role.default('member'),
  })
  .refine((b) => (b.email === undefined) !== (b.userId === undefined), { message: 'give either email or userId: a member of the workspace', path: ['email'] });

export const listTeamsQuerySchema = pageQuerySchema.strict();

export const memberSchema = z
  .object({
    email: z.string(),
    role,
    status,
    chatUserId: z.string().nullable().describe('Their user id on the team’s desk platform (Slack `U…`, Discord user id): who accepts and replies there.'),
  })
  .meta({ id: 'TeamMember' });

export const teamSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    members: z.array(memberSchema),
    availability: z.object({
      status,
      timezone: z.string(),
      weekly: z.array(z.object({ day: z.enum(WEEKDAYS), start: z.string(), end: z.string() })),
    }),
    availableNow: z.boolean().describe('Status available, now inside a weekly window (or none), and a member available.'),
    handoff: z.object({
      offerSeconds: z.number().int().describe('How long a handoff offered to a member waits for them before it goes to the next.'),
      notifyUrl: z.string().nullable().describe('Where handoff events are posted (its secret is never shown).'),
      desk: z
        .object({ channelId: z.string(), conversation: z.string() })
        .nullable()
        .describe('Where members work handoffs in Slack or Discord: a channel of the workspace and a conversation in it, or `dm`.'),
    }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Team' });

export const handoffSettingsSchema = z.strictObject({
  offerSeconds: z.number().int().min(10).max(86_400).optional().describe('How long a handoff offered to a member waits before it goes to the next (10 s – 1 day; default 120).'),
  notify: z
    .strictObject({
      url: z.string().max(2048).describe('Where handoff events are posted (JSON, `X-Switchboard-Signature: sha256=<hmac>`); passes the address guard.'),
      secret: z.string().min(16).max(256).describe('The HMAC key of the signature (write-only).'),
    })
    .nullable()
    .optional()
    .describe('The team’s webhook for handoff events (offered, queued, accepted, message, ended); null removes it.'),
  desk: z
    .strictObject({
      channelId: z.string().min(1).max(64).describe('A Slack or Discord channel of the workspace (chn_…): the bot that posts the cards and hears the replies.'),
      conversation: z
        .string()
        .trim()
        .min(1)
        .max(100)
        .regex(/^[A-Za-z0-9_-]+$/, 'must be a platform channel id (Slack C…, Discord snowflake) or "dm"')
        .describe('Where the cards go: a platform channel id (Slack `C…`, a Discord channel id), or `dm` for the offered member’s direct messages.'),
    })
    .nullable()
    .optional()
    .describe('Where members work handoffs in chat: each handoff’s card (the conversation so far and an Accept button) starts a thread there; the accepting member’s replies in it reach the user. null removes it.'),
  chatUsers: z
    .array(
      z.strictObject({
        email,
        chatUserId: z.string().trim().min(1).max(64).regex(/^[A-Za-z0-9_-]+$/, 'must be a platform user id').nullable().describe('Their user id on the desk platform (Slack `U…`, a Discord user id); null clears it.'),
      }),
    )
    .max(MAX_MEMBERS)
    .superRefine((list, ctx) => noDuplicateEmails(list, (m) => m.email, ctx, ['email']))
    .optional()
    .describe('Members’ user ids on the desk platform: a click or a reply there is theirs only when it comes from this id.'),
});

export type CreateTeamInput = z.infer<typeof createTeamSchema>;
export type UpdateAvailabilityInput = z.infer<typeof updateAvailabilitySchema>;
export type AddMemberInput = z.infer<typeof addMemberSchema>;
export type TeamWindow = z.infer<typeof windowSchema>;
export type TeamMember = z.infer<typeof memberSchema>;
export type Team = z.infer<typeof teamSchema>;
