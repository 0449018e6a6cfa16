/**
 * Sign-in with an OpenID Connect provider (API.md §14, docs/people.md#oidc): the sign-in under way
 * (kept in the database, taken once), the provider's answer (openid-client, oidc.client.ts), and
 * who the person is here (oidc.sign-in.ts). Every change of a sign-in (the user, their identity,
 * memberships, invitations used, a role the claim gives, the session) and its audit events land in
 * one transaction, or none does.
 */
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { OidcConfig } from '../../config.js';
import { isUniqueViolation } from '../../db/backend.js';
import type { ChangeSignals } from '../../db/change-signals.js';
import type { Cipher } from '../../lib/cipher.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import type { ActorOrigin } from '../auth/actor.js';
import type { LoginSessions, StartedSession } from './login-sessions.js';
import { type OidcClient, OidcProviderError } from './oidc.client.js';
import { createOidcSignIn, OidcRefusal } from './oidc.sign-in.js';
import type { OidcStore } from './oidc.store.js';
import { emailKey, type PeopleStore } from './people.store.js';
import type { MembersStore } from './members.store.js';

export { OidcRefusal, roleFromClaim } from './oidc.sign-in.js';

/** A sign-in must come back from the provider within this. */
export const OIDC_PENDING_MS = 10 * 60_000;
const sha256 = (value: string) => crypto.hash('sha256', value, 'hex');

export interface OidcServiceDeps {
  config: OidcConfig;
  client: OidcClient;
  store: OidcStore;
  members: MembersStore;
  people: PeopleStore;
  loginSessions: LoginSessions;
  cipher: Cipher;
  clock: Clock;
  ids: IdGenerator;
  /** A role the claim changed reaches every instance's key cache (keys are capped by their owner's role). */
  signals: ChangeSignals;
  logger: Logger;
}

export function createOidcService({ config, client, store, members, people, loginSessions, cipher, clock, ids, signals, logger }: OidcServiceDeps) {
  const sealContext = (stateHash: string) => `oidc-pending:${stateHash}`;
  const wanted = ['email', 'email_verified', 'name', ...(config.roleClaim ? [config.roleClaim] : [])];

  const { signIn, auditDenied } = createOidcSignIn({ config, store, members, people, loginSessions, clock, ids });

  return {
    /** A sign-in to send the browser to the provider with; the state goes into the browser's `sb_oidc` cookie. */
    async start(redirectUri: string, returnTo: string, invitation: string | undefined): Promise<{ url: string; state: string }> {
      let request;
      try {
        request = await client.authorizationRequest(redirectUri);
      } catch (error) {
        logger.warn({ err: (error as Error).message }, 'oidc: the provider could not be used');
        throw new OidcRefusal(502, 'Sign-in provider unavailable', 'The sign-in provider could not be reached or did not describe itself as configured. Try again later, or ask your administrator.');
      }
      const nowMs = clock.now().getTime();
      await store.deleteExpiredPending(nowMs);
      const stateHash = sha256(request.state);
      await store.insertPending({
        state_hash: stateHash,
        request: cipher.encrypt(JSON.stringify({ nonce: request.nonce, codeVerifier: request.codeVerifier }), sealContext(stateHash)),
        return_to: returnTo,
        invitation_hash: invitation === undefined ? null : sha256(invitation),
        expires_ms: nowMs + OIDC_PENDING_MS,
      });
      return { url: request.url.href, state: request.state };
    },

    /**
     * The callback (`callbackUrl`: the redirect URI with the provider's query): the browser's
     * cookie state must be the response's, and its sign-in still waiting (it is taken once); then
     * the provider's answer is checked and the person signed in. Throws OidcRefusal.
     */
    async finish(callbackUrl: URL, cookieState: string | undefined, origin: ActorOrigin | undefined): Promise<{ started: StartedSession; returnTo: string }> {
      const state = callbackUrl.searchParams.get('state');
      if (!state || !cookieState || state.length > 200 || !crypto.timingSafeEqual(Buffer.from(sha256(state), 'hex'), Buffer.from(sha256(cookieState), 'hex'))) {
        throw new OidcRefusal(400, 'Sign-in not recognised', 'This answer from the sign-in provider does not belong to a sign-in started in this browser. Start signing in again.');
      }
      const stateHash = sha256(state);
      const pending = await store.takePending(stateHash);
      if (!pending || pending.expires_ms <= clock.now().getTime()) {
        throw new OidcRefusal(400, 'Sign-in expired', 'This sign-in was already completed or took too long. Start signing in again.');
      }
      const expected = JSON.parse(cipher.decrypt(pending.request, sealContext(stateHash))) as { nonce: string; codeVerifier: string };
      let verified;
      try {
        verified = await client.finish(callbackUrl, { state, ...expected }, wanted);
      } catch (error) {
        if (error instanceof OidcProviderError && error.byProvider) throw new OidcRefusal(403, 'Sign-in cancelled', `The sign-in provider did not sign you in (${error.message.slice(0, 300)}).`);
        logger.warn({ err: (error as Error).message }, 'oidc: the provider\'s answer was refused');
        throw new OidcRefusal(502, 'Sign-in failed', "The sign-in provider's answer could not be verified, so nobody was signed in. Start signing in again, or ask your administrator.");
      }
      const { issuer, subject, claims } = verified;
      const email = typeof claims.email === 'string' ? claims.email.trim() : '';
      if (email === '' || email.length > 320 || !/^[^@\s]+@[^@\s]+$/.test(email)) {
        throw new OidcRefusal(403, 'No e-mail address', 'The sign-in provider did not give an e-mail address for your account, which Switchboard needs.');
      }
      if (claims.email_verified !== true) {
        const known = (await store.identityUser(store.db, issuer, subject)) ?? (await store.findUserByEmailKey(store.db, emailKey(email)))?.id;
        if (known) await auditDenied(known, origin);
        throw new OidcRefusal(403, 'E-mail address not verified', `The sign-in provider has not verified that ${email} is yours. Verify it there, then sign in again.`, known);
      }
      try {
        const result = await store.db.transaction().execute((trx) => signIn(trx, issuer, subject, claims, email, pending.invitation_hash, origin));
        // Keys are capped by their owner's role, which their caches hold for a while: every instance reads it again.
        if (result.changedRole) await signals.changed('keys');
        return { started: result.started, returnTo: pending.return_to };
      } catch (error) {
        if (error instanceof OidcRefusal) {
          if (error.userId) await auditDenied(error.userId, origin);
          throw error;
        }
        // The same person's first sign-in twice at once: one made the user, this one made nothing.
        if (isUniqueViolation(error)) throw new OidcRefusal(400, 'Sign-in clashed', 'Another sign-in of the same account was being completed at the same moment. Start signing in again.');
        throw error;
      }
    },
  };
}

export type OidcService = ReturnType<typeof createOidcService>;
