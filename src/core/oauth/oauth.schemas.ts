import { z } from 'zod';
import { pageQuerySchema } from '../../lib/pagination.js';

export const grantSchema = z
  .object({
    id: z.string(),
    clientId: z.string().describe('The registered client id, or the URL of its Client ID Metadata Document.'),
    clientName: z.string().describe('As the client named itself.'),
    scopes: z.array(z.enum(['read', 'write'])),
    createdAt: z.string(),
    lastUsedAt: z.string().nullable().describe('May lag by up to a minute.'),
  })
  .meta({ id: 'OAuthGrant' });

export const listGrantsQuerySchema = pageQuerySchema.strict();

/** OAuth's own error body (RFC 6749 §5.2), used on the OAuth endpoints instead of problem+json. */
export const oauthErrorSchema = z
  .object({ error: z.string(), error_description: z.string().optional() })
  .meta({ id: 'OAuthError' });

export const tokenResponseSchema = z
  .object({
    access_token: z.string(),
    token_type: z.literal('Bearer'),
    expires_in: z.number().int(),
    refresh_token: z.string(),
    scope: z.string(),
  })
  .meta({ id: 'OAuthTokens' });

/** The form fields of the OAuth endpoints: strings, each at most once (a repeat is refused by the parser). */
export const formBodySchema = z.record(z.string(), z.string()).describe('application/x-www-form-urlencoded');
