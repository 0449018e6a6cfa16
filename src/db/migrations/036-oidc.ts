import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * OIDC sign-in (issue 41, API.md §14, docs/people.md#oidc):
 * - `oidc_pending`: a sign-in sent to the provider and not yet back, found by the SHA-256 of its
 *   `state` so the callback may reach any instance, taken once (a conditional delete). `request`
 *   (the nonce and the PKCE verifier) is sealed; `return_to` is where the browser goes afterwards;
 *   `invitation_hash` the SHA-256 of the invitation it was started with. Ten minutes, then gone.
 * - `oidc_identities`: who a provider's subject is here, so a returning person is found by
 *   (issuer, subject), not only by an e-mail the provider may let them change.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE oidc_pending (
      state_hash ${d.text} PRIMARY KEY,
      request ${d.text} NOT NULL,
      return_to ${d.text} NOT NULL,
      invitation_hash ${d.text},
      expires_ms ${d.int} NOT NULL
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`CREATE INDEX oidc_pending_expiry ON oidc_pending (expires_ms)`.execute(db);
  await sql`
    CREATE TABLE oidc_identities (
      issuer ${d.text} NOT NULL,
      subject ${d.text} NOT NULL,
      user_id ${d.text} NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      created_at ${d.text} NOT NULL,
      PRIMARY KEY (issuer, subject)
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`CREATE INDEX oidc_identities_user ON oidc_identities (user_id)`.execute(db);
}
