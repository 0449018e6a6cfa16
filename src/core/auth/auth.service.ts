import { isUniqueViolation } from '../../db/backend.js';
import type { ApiKeyRow } from '../../db/schema.js';
import { type ChangeSignals, localChangeSignals } from '../../db/change-signals.js';
import { AppError, ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../../errors.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import { createAuditRows } from '../audit/audit.js';
import { type Actor, systemActor } from './actor.js';
import type { AuthStore, KeyWithOwner } from './auth.store.js';
import { generateKeySecret, hashKey, hasScope, KEY_PATTERN, keyPrefix, type Scope, SCOPES } from './keys.js';
import { capScopes, lowerRole, permits, type Role, roleOfScopes } from './roles.js';


export interface ApiKey {
  id: string;
  name: string;
  prefix: string;
  scopes: Scope[];
  status: 'active' | 'revoked' | 'expired';
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  rotatedAt: string | null;
  /** The person the key belongs to; null for a service key (bootstrap, SWITCHBOARD_ADMIN_KEY, CLI). */
  userId: string | null;
}

export interface Workspace {
  id: string;
  name: string;
  createdAt: string;
}

interface CachedKey {
  actor: Actor;
  expiresAtMs: number | null;
  /** Set when the hash is a rotated-out secret: accepted until then. */
  graceUntilMs: number | null;
  cachedAtMs: number;
}

/** How long a cached lookup is trusted before the database is asked again (covers changes by other processes). */
const CACHE_TTL_MS = 30_000;
const CACHE_MAX_ENTRIES = 10_000;
/** Passes of `bootstrap` when instances starting together insert the same rows (a workspace, a key). */
const BOOTSTRAP_ATTEMPTS = 4;
export const DEFAULT_WORKSPACE = 'default';
const WORKSPACE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

export interface AuthServiceDeps {
  store: AuthStore;
  clock: Clock;
  ids: IdGenerator;
  /** Rotations and revocations reach the caches of the other instances through these (API.md §13). */
  signals?: ChangeSignals;
}

export function createAuthService({ store, clock, ids, signals = localChangeSignals() }: AuthServiceDeps) {
  const cache = new Map<string, CachedKey>();
  // Another instance rotated or revoked a key: what this one cached may be stale.
  signals.onChange('keys', () => cache.clear());
  /** keyId -> last use (epoch ms: formatting a date on every request costs ~0.6 µs), kept in memory and flushed periodically (API.md §2). */
  const lastUsed = new Map<string, number>();
  const pendingUse = (keyId: string) => {
    const ms = lastUsed.get(keyId);
    return ms === undefined ? undefined : new Date(ms).toISOString();
  };

  const nowIso = () => clock.now().toISOString();
  const audit = createAuditRows(ids, clock);

  function toApiKey(row: ApiKeyRow): ApiKey {
    const now = nowIso();
    const status = row.revoked_at ? 'revoked' : row.expires_at !== null && row.expires_at <= now ? 'expired' : 'active';
    const pending = pendingUse(row.id);
    const last = pending && (!row.last_used_at || pending > row.last_used_at) ? pending : row.last_used_at;
    return {
      id: row.id,
      name: row.name,
      prefix: row.prefix,
      scopes: JSON.parse(row.scopes) as Scope[],
      status,
      createdAt: row.created_at,
      expiresAt: row.expires_at,
      lastUsedAt: last,
      rotatedAt: row.rotated_at,
      userId: row.user_id ?? null,
    };
  }

  /**
   * The actor of an active key: a service key acts by its scopes; a person's key is capped by the
   * person's role in the key's workspace at this moment, and is nothing once they are no longer an
   * active member (their keys are revoked then too; this holds in between).
   */
  function keyActor(row: KeyWithOwner): Actor | null {
    const scopes = JSON.parse(row.scopes) as Scope[];
    let role: Role = roleOfScopes(scopes);
    if (row.user_id !== null) {
      if (row.member_role === null || row.user_status !== 'active') return null;
      role = lowerRole(role, row.member_role);
    }
    const effective = capScopes(scopes, role);
    if (effective.length === 0) return null;
    return { kind: 'key', id: row.id, name: row.name, workspaceId: row.workspace_id, role, scopes: effective, userId: row.user_id };
  }

  /** After keys' secrets, status or owners' roles changed: out of this cache now, out of every instance's within a poll. */
  async function forgetKeys(keyIds: readonly string[]) {
    const gone = new Set(keyIds);
    for (const [hash, entry] of cache) if (gone.has(entry.actor.id)) cache.delete(hash);
    await signals.changed('keys');
  }
  const forgetKey = (keyId: string) => forgetKeys([keyId]);

  async function insertKey(
    workspaceId: string,
    name: string,
    scopes: Scope[],
    expiresAt: string | null,
    secret = generateKeySecret(),
    userId: string | null = null,
    /** Who made it, for its `key.create` event (none at start-up). */
    by?: Actor,
  ) {
    const row: ApiKeyRow = {
      id: ids('key'),
      workspace_id: workspaceId,
      name,
      prefix: keyPrefix(secret),
      hash: hashKey(secret),
      scopes: JSON.stringify(scopes),
      created_at: nowIso(),
      expires_at: expiresAt,
      revoked_at: null,
      rotated_at: null,
      last_used_at: null,
      previous_hash: null,
      previous_valid_until: null,
      user_id: userId,
    };
    await store.insertKey(row, by && audit(by, { action: 'key.create', target: { type: 'key', id: row.id } }));
    return { ...toApiKey(row), key: secret };
  }

  async function requireKey(workspaceId: string, id: string) {
    const row = await store.findKey(workspaceId, id);
    if (!row) throw new NotFoundError('API key', id);
    return row;
  }

  /** A key `caller` may rotate or revoke: their own, or anyone's with `admin` (API.md §14). */
  async function requireManageableKey(caller: Actor, id: string) {
    const row = await requireKey(caller.workspaceId, id);
    const own = caller.userId !== null && row.user_id === caller.userId;
    if (!own && !permits(caller.role, 'admin')) {
      throw new ForbiddenError(`Only an admin may manage another person's key${caller.kind === 'user' ? `; your role is "${caller.role}"` : ''}.`);
    }
    return row;
  }

  async function createWorkspaceRow(name: string): Promise<Workspace> {
    if (!WORKSPACE_NAME.test(name)) {
      throw ValidationError.field('name', 'must be 1–100 letters, digits, ".", "_" or "-", starting with a letter or digit');
    }
    if (await store.findWorkspaceByName(name)) throw new ConflictError(`Workspace "${name}" already exists.`);
    const ws = { id: ids('wsp'), name, created_at: nowIso() };
    await store.insertWorkspace(ws);
    return { id: ws.id, name: ws.name, createdAt: ws.created_at };
  }

  /** The actor of a cached key, or null when it is expired or past its rotation grace period. */
  function admit(entry: CachedKey, nowMs: number): Actor | null {
    if (entry.expiresAtMs !== null && entry.expiresAtMs <= nowMs) return null;
    if (entry.graceUntilMs !== null && entry.graceUntilMs <= nowMs) return null;
    lastUsed.set(entry.actor.id, nowMs);
    return entry.actor;
  }

  return {
    /**
     * Resolves a bearer secret to its actor, or null when it is malformed, unknown, revoked,
     * expired or past its rotation grace period. Served from memory after the first lookup.
     */
    async authenticate(secret: string): Promise<Actor | null> {
      if (!KEY_PATTERN.test(secret)) return null;
      const hash = hashKey(secret);
      const nowMs = clock.now().getTime();
      let entry = cache.get(hash);
      if (!entry || nowMs - entry.cachedAtMs > CACHE_TTL_MS) {
        const row = await store.findKeyBySecretHash(hash);
        const actor = row && !row.revoked_at ? keyActor(row) : null;
        if (!row || !actor) {
          cache.delete(hash);
          return null;
        }
        const isPrevious = row.hash !== hash;
        entry = {
          actor,
          expiresAtMs: row.expires_at ? Date.parse(row.expires_at) : null,
          graceUntilMs: isPrevious ? Date.parse(row.previous_valid_until ?? '1970-01-01T00:00:00Z') : null,
          cachedAtMs: nowMs,
        };
        if (cache.size >= CACHE_MAX_ENTRIES) cache.clear();
        cache.set(hash, entry);
      }
      return admit(entry, nowMs);
    },

    /**
     * `authenticate` when memory can answer (the same cache, the same checks), else undefined: the
     * HTTP hook then needs no promise for a known key (issue 18: with the callback auth hooks, ~1 µs per request).
     */
    authenticateCached(secret: string): Actor | null | undefined {
      if (!KEY_PATTERN.test(secret)) return null;
      const entry = cache.get(hashKey(secret));
      if (!entry) return undefined;
      const nowMs = clock.now().getTime();
      return nowMs - entry.cachedAtMs > CACHE_TTL_MS ? undefined : admit(entry, nowMs);
    },

    /**
     * OAuth consent: the actor of the key whose *current* secret this is, when the key is active.
     * A rotated-out secret still in its grace period is refused: a grant outlives that period.
     */
    async authenticateCurrent(secret: string): Promise<Actor | null> {
      if (!KEY_PATTERN.test(secret)) return null;
      const hash = hashKey(secret);
      const row = await store.findKeyBySecretHash(hash);
      if (!row || row.hash !== hash || toApiKey(row).status !== 'active') return null;
      return keyActor(row);
    },

    /**
     * OAuth token use: the key's actor when it is active and was neither revoked nor rotated at or
     * after `sinceIso` (the grant's creation), else null. Read from the database every time, so a
     * revocation or rotation by any process ends the key's grants at once.
     */
    async keyValidSince(keyId: string, sinceIso: string): Promise<Actor | null> {
      const row = await store.findKeyById(keyId);
      if (!row || toApiKey(row).status !== 'active') return null;
      if (row.rotated_at !== null && row.rotated_at >= sinceIso) return null;
      return keyActor(row);
    },

    /** Writes the in-memory `lastUsedAt` values; called periodically and at shutdown. */
    async flushUsage(): Promise<void> {
      if (lastUsed.size === 0) return;
      const entries = [...lastUsed].map(([keyId, ms]): [string, string] => [keyId, new Date(ms).toISOString()]);
      lastUsed.clear();
      await store.recordLastUsed(entries);
    },

    forgetKeys,

    /**
     * A key of the caller's workspace. A person's (signed in, or with a key of theirs) belongs to
     * them, with scopes at most their role and the calling key's; a service key makes service keys,
     * and only with `admin`, as before people existed. Without `scopes`: read and write, as far as
     * the person's role goes.
     */
    async createKey(
      caller: Actor,
      input: { name: string; scopes?: Scope[] | undefined; expiresAt?: string | undefined },
    ) {
      const person = caller.userId !== null;
      if (!person && !permits(caller.role, 'admin')) throw new ForbiddenError('This operation needs the "admin" scope.');
      const defaults = (['read', 'write'] as Scope[]).filter((s) => !person || hasScope(caller.scopes, s));
      const scopes = [...new Set(input.scopes ?? defaults)];
      const missing = scopes.filter((s) => !hasScope(caller.scopes, s));
      if (missing.length > 0) {
        throw new ForbiddenError(
          caller.kind === 'user'
            ? `Your role "${caller.role}" cannot give a key: ${missing.join(', ')}.`
            : `A key can only grant scopes it has${person ? ' (within its owner\'s role)' : ''}; this key lacks: ${missing.join(', ')}.`,
        );
      }
      let expiresAt: string | null = null;
      if (input.expiresAt !== undefined) {
        const t = Date.parse(input.expiresAt);
        if (t <= clock.now().getTime()) throw ValidationError.field('expiresAt', 'must be in the future');
        expiresAt = new Date(t).toISOString();
      }
      return insertKey(caller.workspaceId, input.name, sortScopes(scopes), expiresAt, undefined, caller.userId, caller);
    },

    /** Every key of the workspace for an admin; a person's own otherwise (a non-admin service key: 403). */
    async listKeys(caller: Actor, page: PageRequest): Promise<Page<ApiKey>> {
      if (permits(caller.role, 'admin')) return mapPage(await store.listKeys(caller.workspaceId, page), toApiKey);
      if (caller.userId === null) throw new ForbiddenError('This operation needs the "admin" scope.');
      return mapPage(await store.listKeys(caller.workspaceId, page, caller.userId), toApiKey);
    },

    /** New secret, same id; the old secret keeps working for `gracePeriodSeconds` only. */
    async rotateKey(caller: Actor, id: string, gracePeriodSeconds: number) {
      const row = await requireManageableKey(caller, id);
      const current = toApiKey(row);
      if (current.status !== 'active') throw new ConflictError(`API key ${id} is ${current.status}; it cannot be rotated.`);
      const secret = generateKeySecret();
      const now = clock.now();
      const patch = {
        hash: hashKey(secret),
        prefix: keyPrefix(secret),
        rotated_at: now.toISOString(),
        previous_hash: gracePeriodSeconds > 0 ? row.hash : null,
        previous_valid_until:
          gracePeriodSeconds > 0 ? new Date(now.getTime() + gracePeriodSeconds * 1000).toISOString() : null,
      };
      await store.updateKey(caller.workspaceId, id, patch, audit(caller, { action: 'key.rotate', target: { type: 'key', id } }));
      await forgetKey(id);
      return { ...toApiKey({ ...row, ...patch }), key: secret };
    },

    /** Revokes at once; refuses to revoke the workspace's last active admin key. */
    async revokeKey(caller: Actor, id: string): Promise<void> {
      const row = await requireManageableKey(caller, id);
      const key = toApiKey(row);
      if (key.status === 'revoked') return;
      if (key.status === 'active' && key.scopes.includes('admin')) {
        const others = await store.countOtherActiveAdminKeys(caller.workspaceId, id, nowIso());
        if (others === 0) {
          throw new ConflictError('This is the last active admin key of the workspace; create another admin key first.');
        }
      }
      await store.updateKey(caller.workspaceId, id, { revoked_at: nowIso(), previous_hash: null }, audit(caller, { action: 'key.revoke', target: { type: 'key', id } }));
      await forgetKey(id);
    },

    async me(caller: Actor) {
      const row = await requireKey(caller.workspaceId, caller.id);
      const ws = await store.findWorkspace(caller.workspaceId);
      if (!ws) throw new NotFoundError('Workspace', caller.workspaceId);
      return { key: toApiKey(row), workspace: { id: ws.id, name: ws.name } };
    },

    /** A new workspace and its first admin key (CLI `workspaces create`). */
    async createWorkspace(name: string) {
      const workspace = await createWorkspaceRow(name);
      const key = await insertKey(workspace.id, 'admin', [...SCOPES], null);
      return { workspace, key };
    },

    /** A workspace by name, or undefined (CLI). */
    async findWorkspace(name: string) {
      const ws = await store.findWorkspaceByName(name);
      return ws && { id: ws.id, name: ws.name };
    },

    /** A key for a named workspace (CLI `keys create`). */
    async createKeyInWorkspace(workspaceName: string, name: string, scopes: Scope[]) {
      const ws = await store.findWorkspaceByName(workspaceName);
      if (!ws) {
        const hint = workspaceName === DEFAULT_WORKSPACE ? ' (start the server once to create it)' : '';
        throw new AppError('not_found', `Workspace "${workspaceName}" does not exist${hint}; see "switchboard workspaces create".`);
      }
      const key = await insertKey(ws.id, name, sortScopes([...new Set(scopes)]), null, undefined, null, systemActor(ws.id, 'cli'));
      return { workspace: { id: ws.id, name: ws.name, createdAt: ws.created_at }, key };
    },

    /**
     * Start-up: with `adminKey`, make sure that exact secret is an active admin key of the default
     * workspace; otherwise, on an empty database, create the default workspace and an admin key
     * whose secret is returned (once) for the caller to print.
     */
    async bootstrap(adminKey: string | undefined): Promise<{ workspace: Workspace; key: string } | null> {
      // Instances starting together on one database: another may create the workspace, then the
      // key, each between our read and our insert. Its rows are there then; the next pass finds
      // them. Each pass that fails has met one more row the other wrote, so a few passes suffice.
      for (let attempt = 1; ; attempt++) {
        try {
          return await bootstrapOnce(adminKey);
        } catch (err) {
          // ConflictError: the workspace appeared between bootstrapOnce's read and createWorkspaceRow's.
          const raced = isUniqueViolation(err) || err instanceof ConflictError;
          if (!raced || attempt === BOOTSTRAP_ATTEMPTS) throw err;
        }
      }
    },
  };

  /** `bootstrap` without the retry: the default workspace and its admin key, when missing. */
  async function bootstrapOnce(adminKey: string | undefined): Promise<{ workspace: Workspace; key: string } | null> {
    if (adminKey !== undefined) {
      const ws =
        (await store.findWorkspaceByName(DEFAULT_WORKSPACE)) ?? (await createWorkspaceRow(DEFAULT_WORKSPACE));
      const wsId = ws.id;
      const row = await store.findKeyBySecretHash(hashKey(adminKey));
      if (row && row.workspace_id !== wsId) {
        throw new Error('SWITCHBOARD_ADMIN_KEY already belongs to another workspace.');
      }
      if (row && row.hash !== hashKey(adminKey)) {
        throw new Error('SWITCHBOARD_ADMIN_KEY is a rotated-out secret; set the current one.');
      }
      if (row) {
        await store.updateKey(wsId, row.id, { revoked_at: null, expires_at: null, scopes: JSON.stringify([...SCOPES]) });
        await forgetKey(row.id);
      } else {
        await insertKey(wsId, 'SWITCHBOARD_ADMIN_KEY', [...SCOPES], null, adminKey);
      }
      return null;
    }
    if (await store.firstWorkspace()) return null;
    const workspace = await createWorkspaceRow(DEFAULT_WORKSPACE);
    const key = await insertKey(workspace.id, 'bootstrap', [...SCOPES], null);
    return { workspace, key: key.key };
  }
}

function sortScopes(scopes: Scope[]): Scope[] {
  return SCOPES.filter((s) => scopes.includes(s));
}

export type AuthService = ReturnType<typeof createAuthService>;
