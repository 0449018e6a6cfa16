// The chunk writer merges the keyword index into one segment once writes have been quiet (issue 18:
// a keyword search probes every segment for every term), and leaves a large index to FTS5.
import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createContext } from '../../src/context.js';
import type { ChunkWriterOptions } from '../../src/core/knowledge/chunk-writer.js';
import { createTestApp, type TestApp, tempDir } from '../helpers/app.js';
import { search } from './knowledge-helpers.js';

const TOKENS = ['zqamberx', 'zqbasaltx', 'zqcobaltx'];

describe('merging the keyword index after writes', { timeout: 20_000 }, () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  /** An app whose writer merges as told, holding one source per token, each written in its own transaction. */
  async function withSources(writer: Partial<ChunkWriterOptions>, env: Record<string, string> = {}): Promise<TestApp> {
    t = await createTestApp({ env, overrides: { ingest: { writer } } });
    for (const token of TOKENS) {
      // Small, so processed inside its request: each POST is a write, a transaction and a segment.
      const res = await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: token, content: `Notes on ${token}: the ferry leaves at noon.` } });
      expect(res.statusCode, res.body).toBe(202);
      expect(res.json().status).toBe('ready');
    }
    return t;
  }
  const segments = (app: Pick<TestApp, 'ctx'>) => app.ctx.sqlite().sqlite.prepare('SELECT count(DISTINCT segid) FROM knowledge_fts_idx').pluck().get() as number;
  const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('keeps a segment per write until writes have been quiet for mergeAfterMs', async () => {
    const app = await withSources({ mergeAfterMs: 60_000 });
    await settle(200);
    expect(segments(app)).toBe(TOKENS.length);
  });

  it('then merges them into one, and every search finds what it found before', async () => {
    const app = await withSources({ mergeAfterMs: 20 });
    const deadline = Date.now() + 10_000;
    while (segments(app) > 1 && Date.now() < deadline) await settle(20);
    expect(segments(app)).toBe(1);
    for (const token of TOKENS) {
      const hits = await search(app, { q: token, mode: 'keyword', limit: 10 });
      expect(hits.map((h) => h.sourceName)).toEqual([token]);
    }
    const all = await search(app, { q: 'ferry noon', mode: 'keyword', limit: 10 });
    expect(all.map((h) => h.sourceName).sort()).toEqual([...TOKENS].sort());
  });

  it('merges, at a server start, an index another process left in segments (switchboard ingest, an earlier run)', async () => {
    const dir = tempDir();
    try {
      const first = await withSources({ mergeAfterMs: 60_000 }, { SWITCHBOARD_DATA_DIR: dir });
      expect(segments(first)).toBe(TOKENS.length);
      await first.close();
      t = undefined;
      const ctx = await createContext(loadConfig({ SWITCHBOARD_DATA_DIR: dir, LOG_LEVEL: 'silent' }), { ingest: { writer: { mergeAfterMs: 20 } } });
      try {
        expect(segments({ ctx })).toBe(TOKENS.length);
        ctx.services.knowledge.start();
        const deadline = Date.now() + 10_000;
        while (segments({ ctx }) > 1 && Date.now() < deadline) await settle(20);
        expect(segments({ ctx })).toBe(1);
      } finally {
        await ctx.close();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('leaves an index larger than mergeMaxPages to FTS5', async () => {
    const app = await withSources({ mergeAfterMs: 20, mergeMaxPages: 1 });
    await settle(300);
    expect(segments(app)).toBe(TOKENS.length);
  });
});
