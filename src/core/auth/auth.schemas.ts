import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';
import { SCOPES } from './keys.js';

export const scopeSchema = z.enum(SCOPES);

export const apiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z.string().describe('The first 10 characters of the secret, for recognising it.'),
    scopes: z.array(scopeSchema),
    status: z.enum(['active', 'revoked', 'expired']),
    createdAt: z.string(),
    expiresAt: z.string().nullable(),
    lastUsedAt: z.string().nullable().describe('May lag by up to a minute.'),
    rotatedAt: z.string().nullable(),
    userId: z.string().nullable().describe('The person the key belongs to; null for a service key (bootstrap, SWITCHBOARD_ADMIN_KEY, CLI).'),
  })
  .meta({ id: 'ApiKey' });

export const apiKeyWithSecretSchema = apiKeySchema
  .extend({ key: z.string().describe('The secret. Shown only in this response.') })
  .meta({ id: 'ApiKeyWithSecret' });

export const createKeySchema = z.strictObject({
  name: z.string().trim().min(1).max(200),
  scopes: z.array(scopeSchema).min(1).max(3).optional().describe('Defaults to ["read","write"].'),
  expiresAt: z.iso.datetime({ offset: true }).optional().describe('ISO-8601; must be in the future.'),
});

export const rotateKeySchema = z.strictObject({
  gracePeriodSeconds: z
    .number()
    .int()
    .min(0)
    .max(604_800)
    .default(0)
    .describe('How long the old secret keeps working (0 = revoked at once).'),
});

export const listKeysQuerySchema = pageQuerySchema.strict();

