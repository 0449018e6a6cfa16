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

/** One authorization request parameter: a repeated one arrives as a list, which the endpoint refuses (RFC 6749 §3.1). */
const authorizeParam = (description: string) => z.union([z.string(), z.array(z.string())]).optional().describe(description);

/**
 * The query of `GET /oauth/authorize`: the parameters it reads, named so the OpenAPI document lists
 * them; any other is ignored, as RFC 6749 §3.1 asks of an authorization endpoint.
 */
export const authorizeQuerySchema = z.looseObject({
  response_type: authorizeParam('`code`.'),
  client_id: authorizeParam('A registered client id, or the https URL of a Client ID Metadata Document.'),
  redirect_uri: authorizeParam('One of the redirect URIs the client registered.'),
  scope: authorizeParam("`read` or `read write`; absent: the client's registered scope, else `read write`."),
  state: authorizeParam('Sent back unchanged with the answer (at most 2,048 characters).'),
  code_challenge: authorizeParam('PKCE: the S256 challenge, 43 base64url characters.'),
  code_challenge_method: authorizeParam('`S256`.'),
  resource: authorizeParam('`<base>/mcp` (RFC 8707).'),
});
