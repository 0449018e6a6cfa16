// Ingestion in worker threads with batched writes (API.md §4), seen from search: while many sources
// are being processed, a source's chunks appear all at once with its `ready` status, never in part.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { MODES, search } from './knowledge-helpers.js';

/** Every paragraph carries the source's own token, so a keyword search for it counts its chunks. */
function content(token: string, paragraphs: number): string {
  return Array.from({ length: paragraphs }, (_, p) => `Field note ${p} on ${token}: the quokka colony foraged near the salt lake before the rain came in over the dunes again.`).join('\n\n');
}

describe.each(testBackends())('search while ingestion runs on $kind', { timeout: 60_000 }, (backend) => {
  let t: TestApp;
  // A page on loopback that answers only once released: URL sources fetching it hold the queue.
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const server = http.createServer((_req, res) => {
    void released.then(() => res.writeHead(200, { 'content-type': 'text/plain' }).end(content('zqheldx', 40)));
  });
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t = await createTestApp({
      backend,
      overrides: {
        // 4 sources at a time in the queue (threads + 2), fewer than HELD; about two sources per
        // transaction, so searches run between many commits and a writer splitting a source would show.
        ingest: { workers: 2, writer: { maxChunks: 100 } },
        fetch: { lookup: async () => [{ address: '127.0.0.1', family: 4 }], isAllowedAddress: (a) => a === '127.0.0.1', timeoutMs: 30_000 },
      },
    });
  });
  afterAll(async () => {
    release();
    await t.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('never shows part of a source: a source’s chunks are all found or none, and found means ready', async () => {
    // 40 queued sources (> 64 KiB, so not processed inside the request; ~48 chunks each) and 10
    // processed inside their requests, all at once.
    const large = Array.from({ length: 40 }, (_, i) => ({ token: `zqlarge${i}x`, paragraphs: 550 }));
    const small = Array.from({ length: 10 }, (_, i) => ({ token: `zqsmall${i}x`, paragraphs: 40 }));
    const specs = [...large, ...small];
    const ids = new Map<string, string>();
    // URL sources fetching the held page take every slot of the queue before anything else, so the
    // first round of searches runs while every large source is accepted and waiting, however fast
    // ingestion is; the page is released after that round and ingestion runs under the later ones.
    const HELD = 8;
    const url = `http://held.example.test:${(server.address() as AddressInfo).port}/page`;
    for (let i = 0; i < HELD; i++) {
      const res = await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'url', url } });
      expect(res.statusCode, res.body).toBe(202);
    }
    const posts = specs.map(async (s) => {
      const res = await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: s.token, content: content(s.token, s.paragraphs) } });
      expect(res.statusCode, res.body).toBe(202);
      ids.set(s.token, res.json().id);
    });
    const seen = new Map<string, Set<number>>();
    const partial: string[] = [];
    let rounds = 0;
    let done = false;
    await Promise.all(posts);
    const all = t.ctx.services.knowledge.idle().then(() => (done = true));
    while (!done) {
      if (rounds++ === 1) release(); // after the first round, which ran with the queue held
      for (const s of specs) {
        const hits = await search(t, { q: s.token, mode: 'keyword', limit: 50 });
        expect(hits.every((h) => h.text.includes(s.token)), s.token).toBe(true);
        const id = ids.get(s.token);
        if (hits.length > 0 && id !== undefined) {
          // Found means ready: the chunks and the status are one transaction.
          const status = (await t.request({ method: 'GET', url: `/knowledge/${id}` })).json().status;
          if (status !== 'ready') partial.push(`${s.token} found while ${status}`);
        }
        if (!seen.has(s.token)) seen.set(s.token, new Set());
        seen.get(s.token)!.add(hits.length);
      }
      for (const mode of MODES) {
        for (const h of await search(t, { q: 'quokka colony salt lake', mode, limit: 50 })) {
          const status = (await t.request({ method: 'GET', url: `/knowledge/${h.sourceId}` })).json().status;
          if (status !== 'ready') partial.push(`${mode} hit of ${h.sourceId} while ${status}`);
        }
      }
    }
    await all;
    expect(partial).toEqual([]);
    expect(rounds).toBeGreaterThan(1); // held until the first round ended, so never fewer
    for (const s of specs) {
      const source = (await t.request({ method: 'GET', url: `/knowledge/${ids.get(s.token)}` })).json();
      expect(source.status).toBe('ready');
      expect(source.chunkCount).toBeGreaterThan(1);
      expect(source.chunkCount, s.token).toBeLessThanOrEqual(50); // so a limit-50 search counts them all
      // Every count a search saw was none or all of the source's chunks.
      const counts = [...seen.get(s.token)!];
      expect(counts.every((c) => c === 0 || c === source.chunkCount), `${s.token}: saw ${counts.join(', ')} of ${source.chunkCount}`).toBe(true);
      expect((await search(t, { q: s.token, mode: 'keyword', limit: 50 })).length).toBe(source.chunkCount);
    }
    // The first round ran while every queued source waited behind the held page.
    expect(large.every((s) => seen.get(s.token)!.has(0))).toBe(true);
  });
});
