import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';
import { apiKeySchema } from '../auth/auth.schemas.js';
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from './passwords.js';
import { roleSchema, userSchema } from './people.schemas.js';

const email = z.string().trim().max(254).pipe(z.email('must be an e-mail address'));

export const signInBodySchema = z.strictObject({
  // Not checked as an e-mail address: whatever is typed, a wrong one is the same 401 as a wrong password.
  email: z.string().min(1).max(320),
  password: z.string().min(1).max(MAX_PASSWORD_LENGTH),
  workspace: z
    .string()
    .min(1)
    .max(100)
    .optional()
    .describe('The workspace (id or name) the session acts in; by default the first the person joined ("default" when they are a member of it). Not a member of it → 404.'),
});

export const setupBodySchema = z.strictObject({
  token: z.string().min(1).max(200).describe('The token after `#` in the setup link the start banner printed.'),
  email,
  name: z.string().trim().min(1).max(200),
  password: z.string().min(MIN_PASSWORD_LENGTH, `must be at least ${MIN_PASSWORD_LENGTH} characters`).max(MAX_PASSWORD_LENGTH),
});

export const loginSessionSchema = z
  .object({
    id: z.string(),
    workspaceId: z.string().describe('The workspace the session acts in.'),
    method: z.enum(['password', 'oidc', 'passkey', 'setup', 'invitation']),
    ip: z.string().nullable(),
    userAgent: z.string().nullable(),
    createdAt: z.string(),
    lastSeenAt: z.string().describe('Written at most once a minute.'),
    expiresAt: z.string().describe('The absolute end; the idle end comes first when unused.'),
    current: z.boolean().describe('The session this request was made with.'),
  })
  .meta({ id: 'LoginSession' });

export const listSessionsQuerySchema = pageQuerySchema.strict();

export const meSchema = z
  .object({
    key: apiKeySchema.optional().describe('The calling key (key callers only).'),
    user: userSchema.optional().describe('The person: signed in, or owning the calling key. Absent for a service key.'),
    workspace: z.object({ id: z.string(), name: z.string() }),
    role: roleSchema.describe("The effective role: the person's, capped by the key's scopes; a service key's follows its scopes."),
    csrfToken: z
      .string()
      .optional()
      .describe('Signed in with the cookie: the session\'s CSRF token, for a page that lost it (after the OIDC redirect, or a reload). Send it as X-CSRF-Token.'),
  })
  .meta({ id: 'Me' });
