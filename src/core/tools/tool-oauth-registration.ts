/**
 * Dynamic client registration (RFC 7591) of a tool server's sign-in, once per authorization server
 * (docs/tools.md#tool-servers-that-sign-in-with-oauth, issue 40 item 7): the client registered is
 * stored as soon as it is made, so every consent started later uses it whether or not one succeeded,
 * and of the consents started together (on any instance) one registers while the others wait for
 * its client (a claim taken with a conditional UPDATE, like a refresh's).
 */
import type { Logger } from 'pino';
import type { McpServerRow } from '../../db/schema.js';
import { UpstreamError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { ToolOAuthStore } from './tool-oauth.store.js';

/** How long one consent's claim on the registration lasts should its instance die while registering. */
const REGISTER_CLAIM_MS = 30_000;
/** The registration request's time-out: it ends well within the claim. */
export const REGISTER_TIMEOUT_MS = 10_000;

/** A client registered at `issuer`. */
export interface Registration {
  clientId: string;
  clientSecret?: string | undefined;
  issuer: string;
}

export interface RegistrationDeps {
  store: ToolOAuthStore;
  clock: Clock;
  logger: Logger;
  seal(serverId: string, registration: Registration): string;
  open(serverId: string, sealed: string): Registration;
  sameIssuer(a: string, b: string): boolean;
}

export function createRegistrations({ store, clock, logger, seal, open, sameIssuer }: RegistrationDeps) {
  const nowMs = () => clock.now().getTime();

  /** The server's stored registration at `issuer`, if any. */
  async function stored(serverId: string, issuer: string): Promise<Registration | null> {
    const row = await store.find(serverId);
    const registration = row?.registration ? open(serverId, row.registration) : null;
    return registration?.issuer && sameIssuer(registration.issuer, issuer) ? registration : null;
  }

  return {
    /**
     * The server's client at `issuer`: the one registered before, else the one `register` makes
     * now (exactly once among concurrent callers), stored before it is returned. Throws what
     * `register` throws, or UpstreamError when another caller's registration outlasts its claim.
     */
    async at(server: McpServerRow, issuer: string, register: () => Promise<Omit<Registration, 'issuer'>>): Promise<Registration> {
      const known = await stored(server.id, issuer);
      if (known) return known;
      const until = Date.now() + REGISTER_CLAIM_MS;
      for (let attempt = 0; ; attempt++) {
        const claimed = await store.claimRegistration(server, nowMs(), nowMs() + REGISTER_CLAIM_MS, clock.now().toISOString());
        // Read after claiming: a registration stored just before the claim is used, not repeated.
        const now = await stored(server.id, issuer);
        if (now) {
          if (claimed) await store.releaseRegistration(server.id);
          return now;
        }
        if (claimed) {
          try {
            const made = await register();
            const registration: Registration = { clientId: made.clientId, ...(made.clientSecret ? { clientSecret: made.clientSecret } : {}), issuer };
            await store.saveRegistration(server.id, seal(server.id, registration));
            return registration;
          } catch (err) {
            await store.releaseRegistration(server.id);
            throw err;
          }
        }
        if (attempt === 0) logger.info({ server: server.name, issuer }, 'tool server sign-in waits for the client another consent is registering');
        if (Date.now() >= until) throw new UpstreamError(`${server.name}: another consent is registering Switchboard with its authorization server; try again.`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}
