import crypto from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { ConflictError } from '../../errors.js';
import type { Cipher } from '../../lib/cipher.js';
import type { Clock } from '../../lib/clock.js';

const RETENTION_MS = 24 * 60 * 60 * 1000;
/** A "running" record older than this belongs to a request that died with its process. */
const ABANDONED_MS = 10 * 60 * 1000;

export interface IdempotencyScope {
  workspaceId: string;
  method: string;
  path: string;
  key: string;
}

export interface StoredResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

/** JSON with sorted keys, so `{a,b}` and `{b,a}` are the same body. */
function canonicalJson(value: unknown): string {
  // An uploaded file counts by its digest, not as a 25 MiB array of numbers.
  if (value instanceof Uint8Array) return `"sha256:${crypto.createHash('sha256').update(value).digest('hex')}"`;
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function hashRequestBody(body: unknown): string {
  return crypto.createHash('sha256').update(canonicalJson(body ?? {})).digest('hex');
}

/** Instances sharing the database: this one's lease owner, and which instances are alive (src/db/leases.ts). */
export interface IdempotencyInstances {
  owner: string;
  alive(owners: string[], nowMs: number): Promise<Set<string>>;
}

/**
 * `Idempotency-Key` records (API.md §1): the first response of a creating POST is kept, encrypted,
 * for 24 h and replayed for a repeat with the same body. A `running` record is abandoned (the
 * request died with its process) after ten minutes; with many instances (API.md §13), at once when
 * the instance that runs it is dead, or is this one's previous run.
 */
export function createIdempotencyService(deps: { db: Kysely<Database>; cipher: Cipher; clock: Clock; instances?: IdempotencyInstances }) {
  const { db, cipher, clock, instances } = deps;
  /** The records this process is running now (by their context string). */
  const running = new Set<string>();
  const where = (s: IdempotencyScope) =>
    db
      .selectFrom('idempotency_keys')
      .selectAll()
      .where('workspace_id', '=', s.workspaceId)
      .where('method', '=', s.method)
      .where('path', '=', s.path)
      .where('key', '=', s.key);
  const context = (s: IdempotencyScope) => `idempotency:${s.workspaceId}:${s.method}:${s.path}:${s.key}`;

  const remove = (s: IdempotencyScope) =>
    db
      .deleteFrom('idempotency_keys')
      .where('workspace_id', '=', s.workspaceId)
      .where('method', '=', s.method)
      .where('path', '=', s.path)
      .where('key', '=', s.key)
      .execute();

  /** A running record whose request is gone: its instance died, or it is this instance's, from a run before this one. */
  async function abandoned(owner: string | null, scope: IdempotencyScope): Promise<boolean> {
    if (!instances || owner === null) return false;
    if (owner === instances.owner) return !running.has(context(scope));
    return !(await instances.alive([owner], clock.now().getTime())).has(owner);
  }

  return {
    /**
     * Claims the key for this request. Returns the stored response to replay, or null when the
     * caller should run the request and then `complete` (or `release`) it.
     */
    async begin(scope: IdempotencyScope, requestHash: string): Promise<StoredResponse | null> {
      const now = clock.now();
      const existing = await where(scope).executeTakeFirst();
      if (existing) {
        const age = now.getTime() - Date.parse(existing.created_at);
        const stale = age > RETENTION_MS || (existing.state === 'running' && (age > ABANDONED_MS || (await abandoned(existing.owner, scope))));
        if (!stale) {
          if (existing.request_hash !== requestHash) {
            throw new ConflictError('This Idempotency-Key was already used with a different request body.');
          }
          if (existing.state === 'running' || existing.response === null || existing.status_code === null) {
            throw new ConflictError('A request with this Idempotency-Key is still being processed.');
          }
          const stored = JSON.parse(cipher.decrypt(existing.response, context(scope))) as Omit<StoredResponse, 'statusCode'>;
          return { statusCode: existing.status_code, ...stored };
        }
        await remove(scope);
      }
      const inserted = await db
        .insertInto('idempotency_keys')
        .values({
          workspace_id: scope.workspaceId,
          method: scope.method,
          path: scope.path,
          key: scope.key,
          request_hash: requestHash,
          state: 'running',
          status_code: null,
          response: null,
          created_at: now.toISOString(),
          owner: instances?.owner ?? null,
        })
        .onConflict((oc) => oc.doNothing())
        .executeTakeFirst();
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 0) {
        throw new ConflictError('A request with this Idempotency-Key is still being processed.');
      }
      running.add(context(scope));
      return null;
    },

    async complete(scope: IdempotencyScope, response: StoredResponse): Promise<void> {
      running.delete(context(scope));
      const sealed = cipher.encrypt(JSON.stringify({ headers: response.headers, body: response.body }), context(scope));
      await db
        .updateTable('idempotency_keys')
        .set({ state: 'done', status_code: response.statusCode, response: sealed })
        .where('workspace_id', '=', scope.workspaceId)
        .where('method', '=', scope.method)
        .where('path', '=', scope.path)
        .where('key', '=', scope.key)
        .execute();
    },

    /** Forgets the key (5xx answers are not kept, so the client may retry). */
    release: (scope: IdempotencyScope) => {
      running.delete(context(scope));
      return remove(scope);
    },

    /** Drops records past their 24 h. */
    async purgeExpired(): Promise<void> {
      const cutoff = new Date(clock.now().getTime() - RETENTION_MS).toISOString();
      await db.deleteFrom('idempotency_keys').where('created_at', '<', cutoff).execute();
    },
  };
}

export type IdempotencyService = ReturnType<typeof createIdempotencyService>;
