import { type Kysely, sql } from 'kysely';
import type { MigrationDialect } from '../dialect.js';

/**
 * Work that must run on exactly one instance at a time (API.md §13), as named leases
 * (src/db/leases.ts): `channel:<id>` for the Slack Socket Mode connection or Discord gateway session
 * of a channel, `instance:<owner>` for an instance that is alive. `note` carries what the holder
 * reports (a channel's status). `channel_inbox.claimed_by` names the instance answering a message,
 * so a message is taken from another instance only when that instance's lease has lapsed.
 */
export async function up(db: Kysely<unknown>, d: MigrationDialect): Promise<void> {
  await sql`
    CREATE TABLE leases (
      name ${d.text} PRIMARY KEY,
      owner ${d.text} NOT NULL,
      until_ms ${d.int} NOT NULL,
      note ${d.text}
    ) ${d.strictWithoutRowid}`.execute(db);
  await sql`ALTER TABLE channel_inbox ADD COLUMN claimed_by ${d.text}`.execute(db);
}
