import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from './passwords.js';
import { roleSchema } from './people.schemas.js';

export const memberSchema = z
  .object({
    userId: z.string(),
    email: z.string(),
    name: z.string(),
    role: roleSchema,
    status: z.enum(['active', 'disabled']).describe("The user's status across the installation."),
    joinedAt: z.string(),
    lastSeenAt: z.string().nullable(),
  })
  .meta({ id: 'Member' });

export const invitationSchema = z
  .object({
    id: z.string(),
    email: z.string(),
    role: roleSchema,
    expiresAt: z.string(),
  })
  .meta({ id: 'Invitation' });

export const createdInvitationSchema = z.object({
  invitation: invitationSchema,
  url: z.string().describe('The one-use link (`<public URL>/console/invite#<token>`), shown only in this response.'),
});

export const listQuerySchema = pageQuerySchema.strict();

export const memberParams = z.object({ userId: z.string() });

export const changeRoleSchema = z.strictObject({ role: roleSchema });

export const inviteSchema = z.strictObject({
  email: z.email().max(320),
  role: roleSchema,
});

export const acceptInvitationSchema = z.strictObject({
  token: z.string().min(1).max(200).describe('The part of the link after `#`.'),
  name: z.string().trim().min(1).max(200).describe("The new user's name (ignored for an existing user)."),
  password: z
    .string()
    .min(MIN_PASSWORD_LENGTH)
    .max(MAX_PASSWORD_LENGTH)
    .describe(`A new user's password (at least ${MIN_PASSWORD_LENGTH} characters), or an existing user's own.`),
});
