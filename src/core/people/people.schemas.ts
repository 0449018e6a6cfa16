import { z } from 'zod';
import { ROLES } from '../auth/roles.js';

export const roleSchema = z.enum(ROLES);

export const userSchema = z
  .object({
    id: z.string(),
    email: z.string(),
    name: z.string(),
    status: z.enum(['active', 'disabled']),
    createdAt: z.string(),
    lastSeenAt: z.string().nullable(),
  })
  .meta({ id: 'User' });

export const membershipSchema = z
  .object({
    workspace: z.object({ id: z.string(), name: z.string() }),
    role: roleSchema,
  })
  .meta({ id: 'Membership' });

/** What every way of signing in answers, with the session cookie (API.md §14). */
export const signedInSchema = z
  .object({
    user: userSchema,
    memberships: z.array(membershipSchema),
    csrfToken: z.string().describe('Send it as X-CSRF-Token with every request that changes something.'),
  })
  .meta({ id: 'SignedIn' });
