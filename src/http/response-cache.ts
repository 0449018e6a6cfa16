import crypto from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { onRoutesWhere } from './route-hooks.js';

/** What tells the cache the database is unchanged; `Db` provides both. */
export interface ChangeCounters {
  /** Writes by this process's connection: cheap, read for every request. */
  localChanges(): number;
  /** Commits by other connections and processes: a read transaction, read once per batch. */
  dataVersion(): number;
}

interface Entry {
  changes: number;
  version: number;
  body: string;
  etag: string;
  contentType: string;
}

interface Pending {
  key: string;
  changes: number;
  version: number;
}

interface Waiting {
  request: FastifyRequest;
  reply: FastifyReply;
  done: HookHandlerDoneFunction;
}

const MAX_ENTRIES = 2_000;
const MAX_BYTES = 32 * 1024 * 1024;
const MAX_ENTRY_BYTES = 512 * 1024;
const NO_CACHE = /no-cache/i;

/**
 * Serialized answers of read routes marked `cache: true`, kept per workspace and URL and valid only
 * while the database is unchanged (`ChangeCounters`: any write by this process or another empties it
 * in effect), so a cached answer is never stale. Only routes whose answer is a function of the
 * stored rows may opt in (not, e.g., key lists, whose status depends on the clock).
 * Answers carry an ETag; `If-None-Match` gets 304, `Cache-Control: no-cache` skips the lookup.
 * Register after the auth hooks: their `preParsing` must refuse a request before this one answers it.
 *
 * Lookups wait for the end of the event-loop turn that read their request (`setImmediate`) and run
 * together under one `dataVersion()`: its three system calls per request cost ~3 µs of ~25 µs of
 * server CPU for an authenticated cached list under load (issue 18). Every request of a batch arrived before that read, so a commit another
 * process finished before a request was sent is always seen; this connection's own writes are
 * compared per request (`localChanges()`), so a write through the API is seen by the next request
 * even within the same turn.
 */
export function registerResponseCache(app: FastifyInstance, counters: ChangeCounters) {
  const entries = new Map<string, Entry>();
  let bytes = 0;
  const pendingOf = new WeakMap<FastifyRequest, Pending>();
  let waiting: Waiting[] = [];

  const evict = (key: string) => {
    const old = entries.get(key);
    if (old) {
      bytes -= old.body.length;
      entries.delete(key);
    }
  };

  const lookup = ({ request, reply, done }: Waiting, version: number) => {
    const actor = request.actor;
    if (!actor) return done();
    const key = `${actor.workspaceId}\n${request.url}`;
    const changes = counters.localChanges();
    const cacheControl = request.headers['cache-control'];
    const hit = cacheControl !== undefined && NO_CACHE.test(cacheControl) ? undefined : entries.get(key);
    if (hit && hit.changes === changes && hit.version === version) {
      // Re-insert: the Map's order is the eviction order (least recently used first).
      entries.delete(key);
      entries.set(key, hit);
      reply.header('etag', hit.etag);
      // Answered: the hook chain stops here, `done` is not called.
      if (request.headers['if-none-match'] === hit.etag) reply.code(304).send();
      else reply.type(hit.contentType).send(hit.body);
      return;
    }
    // The stamp is taken before the handler reads, so a write in between makes the entry stale, not wrong.
    pendingOf.set(request, { key, changes, version });
    done();
  };

  const runBatch = () => {
    const batch = waiting;
    waiting = [];
    let version: number;
    try {
      version = counters.dataVersion();
    } catch (err) {
      for (const w of batch) w.done(err as Error);
      return;
    }
    for (const w of batch) {
      try {
        lookup(w, version);
      } catch (err) {
        w.done(err as Error);
      }
    }
  };

  // preParsing, right after authentication and the rate limit: a hit skips parsing and validation,
  // which the URL already passed when its answer was stored.
  const preParsing = (request: FastifyRequest, reply: FastifyReply, _payload: unknown, done: HookHandlerDoneFunction) => {
    if (!request.actor) return done();
    if (waiting.length === 0) setImmediate(runBatch);
    waiting.push({ request, reply, done });
  };

  const onSend = (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: Error | null, payload?: unknown) => void) => {
    const pending = pendingOf.get(request);
    if (!pending || reply.statusCode !== 200 || typeof payload !== 'string') return done(null, payload);
    const etag = `"${crypto.createHash('sha256').update(payload).digest('base64url').slice(0, 27)}"`;
    reply.header('etag', etag);
    evict(pending.key);
    if (payload.length <= MAX_ENTRY_BYTES) {
      entries.set(pending.key, {
        changes: pending.changes,
        version: pending.version,
        body: payload,
        etag,
        contentType: String(reply.getHeader('content-type') ?? 'application/json'),
      });
      bytes += payload.length;
      for (const oldest of entries.keys()) {
        if (entries.size <= MAX_ENTRIES && bytes <= MAX_BYTES) break;
        evict(oldest);
      }
    }
    if (request.headers['if-none-match'] === etag) {
      reply.code(304);
      return done(null, '');
    }
    done(null, payload);
  };

  onRoutesWhere(app, (route) => route.config?.cache === true && route.method === 'GET', { preParsing, onSend });
}
