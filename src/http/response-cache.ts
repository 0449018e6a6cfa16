import crypto from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { onRoutesWhere } from './route-hooks.js';

interface Entry {
  stamp: string;
  body: string;
  etag: string;
  contentType: string;
}

const MAX_ENTRIES = 2_000;
const MAX_BYTES = 32 * 1024 * 1024;
const MAX_ENTRY_BYTES = 512 * 1024;

/**
 * Serialized answers of read routes marked `cache: true`, kept per workspace and URL and valid only
 * while the database is unchanged (`changeStamp`: any write by this process or another empties it
 * in effect), so a cached answer is never stale. Only routes whose answer is a function of the
 * stored rows may opt in (not, e.g., key lists, whose status depends on the clock).
 * Answers carry an ETag; `If-None-Match` gets 304, `Cache-Control: no-cache` skips the lookup.
 * Register after the auth hooks: their `preParsing` must refuse a request before this one answers it.
 */
export function registerResponseCache(app: FastifyInstance, changeStamp: () => string) {
  const entries = new Map<string, Entry>();
  let bytes = 0;
  const stampOf = new WeakMap<FastifyRequest, { key: string; stamp: string }>();

  const evict = (key: string) => {
    const old = entries.get(key);
    if (old) {
      bytes -= old.body.length;
      entries.delete(key);
    }
  };

  // preParsing, right after authentication and the rate limit: a hit skips parsing and validation,
  // which the URL already passed when its answer was stored.
  const preParsing = async (request: FastifyRequest, reply: FastifyReply) => {
    if (!request.principal) return;
    const key = `${request.principal.workspaceId}\n${request.url}`;
    const stamp = changeStamp();
    const noCache = /no-cache/i.test(String(request.headers['cache-control'] ?? ''));
    const hit = noCache ? undefined : entries.get(key);
    if (hit && hit.stamp === stamp) {
      // Re-insert: the Map's order is the eviction order (least recently used first).
      entries.delete(key);
      entries.set(key, hit);
      reply.header('etag', hit.etag);
      if (request.headers['if-none-match'] === hit.etag) return reply.code(304).send();
      return reply.type(hit.contentType).send(hit.body);
    }
    // The stamp is taken before the handler reads, so a write in between makes the entry stale, not wrong.
    stampOf.set(request, { key, stamp });
  };

  const onSend = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const pending = stampOf.get(request);
    if (!pending || reply.statusCode !== 200 || typeof payload !== 'string') return payload;
    const etag = `"${crypto.createHash('sha256').update(payload).digest('base64url').slice(0, 27)}"`;
    reply.header('etag', etag);
    evict(pending.key);
    if (payload.length <= MAX_ENTRY_BYTES) {
      entries.set(pending.key, { stamp: pending.stamp, body: payload, etag, contentType: String(reply.getHeader('content-type') ?? 'application/json') });
      bytes += payload.length;
      for (const oldest of entries.keys()) {
        if (entries.size <= MAX_ENTRIES && bytes <= MAX_BYTES) break;
        evict(oldest);
      }
    }
    if (request.headers['if-none-match'] === etag) {
      reply.code(304);
      return '';
    }
    return payload;
  };

  onRoutesWhere(app, (route) => route.config?.cache === true && route.method === 'GET', { preParsing, onSend });
}
