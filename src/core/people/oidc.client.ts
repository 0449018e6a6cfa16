/**
 * The relying party's side of OpenID Connect, all of it done by `openid-client` (panva; issue 41
 * "hand-roll none of the protocols"): discovery, PKCE, state, nonce, the code exchange and every
 * ID token check. The package is imported at the first OIDC sign-in, never at a plain start
 * (test/e2e/startup-modules.test.ts), and the provider's metadata is discovered then and kept.
 */
import type * as OpenIdClient from 'openid-client';
import type { OidcConfig } from '../../config.js';

/** What a sign-in asks the provider for: the person's subject, e-mail and name. */
const SCOPE = 'openid email profile';
/** Seconds a request to the provider may take (discovery, token, userinfo). */
const TIMEOUT_SECONDS = 10;

/** The provider refused or failed; `byProvider`: it answered the authorization request with an error (the person cancelled, a policy). */
export class OidcProviderError extends Error {
  constructor(
    message: string,
    readonly byProvider: boolean,
  ) {
    super(message);
    this.name = 'OidcProviderError';
  }
}

/** A sign-in request to send the browser with, and what its callback must be checked against. */
export interface OidcRequest {
  url: URL;
  state: string;
  nonce: string;
  codeVerifier: string;
}

/** The claims of a sign-in that passed every check: the ID token's, completed from userinfo where it left some out. */
export interface OidcClaims {
  issuer: string;
  subject: string;
  claims: Record<string, unknown>;
}

export function createOidcClient(config: OidcConfig) {
  type Loaded = { lib: typeof OpenIdClient; conf: OpenIdClient.Configuration };
  let loading: Promise<Loaded> | undefined;

  /** The package and the provider's configuration, discovered at first use; a failed discovery is tried again next time. */
  function load(): Promise<Loaded> {
    loading ??= (async () => {
      const lib = await import('openid-client');
      const secret = config.clientSecret;
      const basic = lib.ClientSecretBasic(secret);
      const post = lib.ClientSecretPost(secret);
      // client_secret_basic is the default where the provider does not say (RFC 8414 §2); post where only it is offered.
      const auth: OpenIdClient.ClientAuth = (as, client, body, headers) => {
        const methods = as.token_endpoint_auth_methods_supported;
        return (methods === undefined || methods.includes('client_secret_basic') ? basic : post)(as, client, body, headers);
      };
      // Plain http only for an http issuer (tests, a Keycloak on the same host): never a downgrade of an https one.
      const insecure = new URL(config.issuer).protocol === 'http:';
      const conf = await lib.discovery(new URL(config.issuer), config.clientId, undefined, auth, {
        timeout: TIMEOUT_SECONDS,
        ...(insecure ? { execute: [lib.allowInsecureRequests] } : {}),
      });
      return { lib, conf };
    })();
    const current = loading;
    current.catch(() => {
      if (loading === current) loading = undefined;
    });
    return current;
  }

  return {
    /** A new authorization request (code flow, PKCE S256, state, nonce) for the browser to take to the provider. */
    async authorizationRequest(redirectUri: string): Promise<OidcRequest> {
      const { lib, conf } = await provider(load);
      const codeVerifier = lib.randomPKCECodeVerifier();
      const state = lib.randomState();
      const nonce = lib.randomNonce();
      const url = lib.buildAuthorizationUrl(conf, {
        redirect_uri: redirectUri,
        scope: SCOPE,
        code_challenge: await lib.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
        state,
        nonce,
      });
      return { url, state, nonce, codeVerifier };
    },

    /**
     * The callback: checks the response (state, `iss`), exchanges the code with the PKCE verifier,
     * checks the ID token (signature, issuer, audience, expiry, nonce) and reads userinfo for the
     * claims the ID token left out. `callbackUrl` is the redirect URI with the provider's query (the
     * code is redeemed for that redirect URI). Throws OidcProviderError.
     */
    async finish(callbackUrl: URL, expected: { state: string; nonce: string; codeVerifier: string }, wanted: readonly string[]): Promise<OidcClaims> {
      const { lib, conf } = await provider(load);
      return provider(async () => {
        let tokens;
        try {
          tokens = await lib.authorizationCodeGrant(
            conf,
            callbackUrl,
            { pkceCodeVerifier: expected.codeVerifier, expectedState: expected.state, expectedNonce: expected.nonce, idTokenExpected: true },
          );
        } catch (error) {
          if (error instanceof lib.AuthorizationResponseError) {
            const description = error.error_description ? `: ${error.error_description}` : '';
            throw new OidcProviderError(`${error.error}${description}`, true);
          }
          throw error;
        }
        const idToken = tokens.claims();
        if (!idToken) throw new OidcProviderError('The provider sent no ID token.', false);
        let claims: Record<string, unknown> = { ...idToken };
        const endpoint = conf.serverMetadata().userinfo_endpoint;
        if (endpoint && wanted.some((name) => claims[name] === undefined)) {
          // Userinfo's `sub` must be the ID token's (checked by fetchUserInfo); the signed ID token wins where both say.
          const info = await lib.fetchUserInfo(conf, tokens.access_token, idToken.sub);
          claims = { ...info, ...idToken };
        }
        return { issuer: idToken.iss, subject: idToken.sub, claims };
      });
    },
  };
}

export type OidcClient = ReturnType<typeof createOidcClient>;

/** Runs a step against the provider: whatever it throws (unreachable, a bad answer, a failed check) is an OidcProviderError. */
async function provider<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (error instanceof OidcProviderError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    throw new OidcProviderError(message, false);
  }
}
