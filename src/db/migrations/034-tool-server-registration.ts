import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * A tool server's dynamic client registration is kept when it is made (issue 40 item 7), not only
 * once a sign-in succeeds, so every consent started after it uses the same client:
 * - `registration`: the client registered (RFC 7591) and the authorization server it belongs to,
 *   sealed like `client` (context: the server id); `client` stays the one the current tokens were
 *   issued to.
 * - `registering_until_ms`: the claim of the one start registering (a conditional UPDATE, on both
 *   backends), so consents started together register once.
 * A dynamic client already used for a sign-in is the registration.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`ALTER TABLE mcp_server_oauth ADD COLUMN registration ${d.text}`.execute(db);
  await sql`ALTER TABLE mcp_server_oauth ADD COLUMN registering_until_ms ${d.int}`.execute(db);
  await sql`UPDATE mcp_server_oauth SET registration = client WHERE client_method = 'dynamic'`.execute(db);
}
