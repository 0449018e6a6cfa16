// Ingestion in worker threads with batched writes (API.md §4), seen from search: while many sources
// are being processed, a source's chunks appear all at once with its `ready` status, never in part.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { MODES, search } from './knowledge-helpers.js';

/** Every paragraph carries the source's own token, so a keyword search for it counts its chunks. */
function content(token: string, paragraphs: number): string {
  return Array.from({ length: paragraphs }, (_, p) => `Field note ${p} on ${token}: the quokka colony foraged near the salt lake before the rain came in over the dunes again.`).join('\n\n');
}

describe('search while ingestion runs', { timeout: 60_000 }, () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => t.close());

  it('never shows part of a source: a source’s chunks are all found or none, and found means ready', async () => {
    // 40 queued sources (> 64 KiB, ~45 chunks each) and 10 processed inside their requests, all at once.
    const large = Array.from({ length: 40 }, (_, i) => ({ token: `zqlarge${i}x`, paragraphs: 520 }));
    const small = Array.from({ length: 10 }, (_, i) => ({ token: `zqsmall${i}x`, paragraphs: 40 }));
    const specs = [...large, ...small];
    const ids = new Map<string, string>();
    // Load only, never searched for, queued first: the sources searched for wait behind it, so the
    // first search rounds find them not yet processed however fast ingestion is.
    const filler = Array.from({ length: 60 }, (_, i) => ({ token: `zqfiller${i}x`, paragraphs: 520 }));
    const posts = [...filler, ...specs].map(async (s) => {
      const res = await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: s.token, content: content(s.token, s.paragraphs) } });
      expect(res.statusCode, res.body).toBe(202);
      ids.set(s.token, res.json().id);
    });
    const seen = new Map<string, Set<number>>();
    const partial: string[] = [];
    let rounds = 0;
    let done = false;
    const all = Promise.all(posts).then(() => t.ctx.services.knowledge.idle()).then(() => (done = true));
    while (!done) {
      rounds++;
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
    expect(rounds).toBeGreaterThan(1); // searches really ran while ingesting
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
    // Some searches ran before a queued source was ready: the test saw ingestion in progress.
    expect(large.some((s) => seen.get(s.token)!.has(0))).toBe(true);
  });
});
