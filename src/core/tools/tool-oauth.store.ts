import type { Kysely } from 'kysely';
import { type AuditRow, withAudit } from '../audit/audit.js';
import type { Database, McpServerOAuthRow } from '../../db/schema.js';

/** How tool servers are signed in to with OAuth (migration 022); every query names the server or the workspace. */
/** A server's OAuth row before anything is known of its authorization server: waiting for an admin's consent. */
export function awaitingConsent(server: { id: string; workspace_id: string }, now: string): Omit<McpServerOAuthRow, 'version' | 'refreshing_until_ms' | 'registration' | 'registering_until_ms'> {
  return {
    server_id: server.id,
    workspace_id: server.workspace_id,
    status: 'needs_consent',
    error: null,
    resource_metadata_url: null,
    challenge_scope: null,
    issuer: null,
    client_method: null,
    client: null,
    tokens: null,
    scope: null,
    expires_ms: null,
    refresh_at_ms: null,
    updated_at: now,
  };
}

export function createToolOAuthStore(db: Kysely<Database>) {
  return {
    find: (serverId: string) => db.selectFrom('mcp_server_oauth').selectAll().where('server_id', '=', serverId).executeTakeFirst(),

    /** The rows of these servers of the workspace (a page of the server list). */
    findMany: (workspaceId: string, serverIds: string[]) =>
      serverIds.length === 0
        ? Promise.resolve([] as McpServerOAuthRow[])
        : db.selectFrom('mcp_server_oauth').selectAll().where('workspace_id', '=', workspaceId).where('server_id', 'in', serverIds).execute(),

    /** Creates the row, or changes it; every change takes the next `version`. A dynamic registration stays. */
    async upsert(row: Omit<McpServerOAuthRow, 'version' | 'refreshing_until_ms' | 'registration' | 'registering_until_ms'>): Promise<void> {
      await db
        .insertInto('mcp_server_oauth')
        .values({ ...row, version: 1, refreshing_until_ms: null })
        .onConflict((oc) => oc.column('server_id').doUpdateSet((eb) => ({ ...row, version: eb('mcp_server_oauth.version', '+', 1), refreshing_until_ms: null })))
        .execute();
    },

    /** Changes some columns of an existing row; the next `version`. */
    async update(serverId: string, patch: Partial<Omit<McpServerOAuthRow, 'server_id' | 'workspace_id' | 'version'>>, audit?: AuditRow): Promise<void> {
      await withAudit(db, audit, async (trx) => {
        await trx
          .updateTable('mcp_server_oauth')
          .set((eb) => ({ ...patch, version: eb('version', '+', 1) }))
          .where('server_id', '=', serverId)
          .execute();
      });
    },

    /** As `update`, only over the row of `version`; false when it changed meanwhile. */
    async updateIfVersion(serverId: string, version: number, patch: Partial<Omit<McpServerOAuthRow, 'server_id' | 'workspace_id' | 'version'>>): Promise<boolean> {
      const r = await db
        .updateTable('mcp_server_oauth')
        .set({ ...patch, version: version + 1 })
        .where('server_id', '=', serverId)
        .where('version', '=', version)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) === 1;
    },

    /**
     * Claims the refresh of the tokens of `version` until `untilMs`: true for exactly one caller
     * among the instances, while the tokens are unchanged and no other claim is alive.
     */
    async claimRefresh(serverId: string, version: number, nowMs: number, untilMs: number): Promise<boolean> {
      const r = await db
        .updateTable('mcp_server_oauth')
        .set({ refreshing_until_ms: untilMs })
        .where('server_id', '=', serverId)
        .where('version', '=', version)
        .where((eb) => eb.or([eb('refreshing_until_ms', 'is', null), eb('refreshing_until_ms', '<', nowMs)]))
        .executeTakeFirst();
      return Number(r.numUpdatedRows) === 1;
    },

    /** Ends a claim that did not change the tokens (the authorization server could not be reached). */
    async releaseRefresh(serverId: string, version: number): Promise<void> {
      await db.updateTable('mcp_server_oauth').set({ refreshing_until_ms: null }).where('server_id', '=', serverId).where('version', '=', version).execute();
    },

    /**
     * Claims the dynamic registration of the server's client until `untilMs`: true for exactly one
     * caller among the instances while no other claim is alive. A server without a row gets one,
     * waiting for consent. The claim and the registration leave `version` (the tokens') alone.
     */
    async claimRegistration(server: { id: string; workspace_id: string }, nowMs: number, untilMs: number, now: string): Promise<boolean> {
      await db
        .insertInto('mcp_server_oauth')
        .values({ ...awaitingConsent(server, now), version: 1, refreshing_until_ms: null })
        .onConflict((oc) => oc.column('server_id').doNothing())
        .execute();
      const r = await db
        .updateTable('mcp_server_oauth')
        .set({ registering_until_ms: untilMs })
        .where('server_id', '=', server.id)
        .where((eb) => eb.or([eb('registering_until_ms', 'is', null), eb('registering_until_ms', '<', nowMs)]))
        .executeTakeFirst();
      return Number(r.numUpdatedRows) === 1;
    },

    /** Keeps the registration made under the claim (sealed), and ends the claim. */
    async saveRegistration(serverId: string, registration: string): Promise<void> {
      await db.updateTable('mcp_server_oauth').set({ registration, registering_until_ms: null }).where('server_id', '=', serverId).execute();
    },

    /** Ends a claim that registered nothing (the registration failed, or another had stored one). */
    async releaseRegistration(serverId: string): Promise<void> {
      await db.updateTable('mcp_server_oauth').set({ registering_until_ms: null }).where('server_id', '=', serverId).execute();
    },

    insertPending: (row: { state_hash: string; workspace_id: string; server_id: string; request: string; expires_ms: number }, audit?: AuditRow) =>
      withAudit(db, audit, async (trx) => {
        await trx.insertInto('mcp_server_oauth_pending').values(row).execute();
      }),

    /** Takes a pending request out (it answers once), whatever its age; the caller checks expiry. */
    takePending: (stateHash: string) => db.deleteFrom('mcp_server_oauth_pending').where('state_hash', '=', stateHash).returningAll().executeTakeFirst(),

    deleteExpiredPending: (nowMs: number) => db.deleteFrom('mcp_server_oauth_pending').where('expires_ms', '<', nowMs).execute(),
  };
}

export type ToolOAuthStore = ReturnType<typeof createToolOAuthStore>;
