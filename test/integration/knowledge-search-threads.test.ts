// Searches on a worker thread (search-pool.ts, issue 18) answer exactly what the main thread
// answers, see writes as soon as they are committed, and fall back to the main thread when closed.
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fusionFor } from '../../src/core/knowledge/fusion.js';
import type { SearchMode } from '../../src/core/knowledge/knowledge.schemas.js';
import { createSearchPool, type SearchPool } from '../../src/core/knowledge/search-pool.js';
import type { SearchFilter } from '../../src/core/knowledge/search-index.js';
import { HASHED_DIMENSION } from '../../src/llm/hashed-embedder.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { addSource, createPersona, workspaceOf } from '../helpers/factories.js';
import { waitFor } from '../helpers/mcp-tools.js';

const ARTICLES = [
  ['Refunds', 'Refunds are paid back to the original card within 14 days of the request.'],
  ['Invoices', 'Invoices are issued monthly as PDF files with your VAT number and billing address.'],
  ['Passwords', 'A password reset link expires after one hour; ten failed attempts cause a lockout.'],
  ['Webhooks', 'Webhook deliveries are signed with the signing secret and retried for three days.'],
  ['Exports', 'A data export produces an archive of JSON lines with a download link by email.'],
] as const;
const QUERIES = ['how long do refunds take', 'VAT on invoices', 'password reset link expired', 'signing secret retries', 'the the the', 'download archive'];
const MODES: SearchMode[] = ['hybrid', 'keyword', 'vector'];

describe('search threads', () => {
  let t: TestApp;
  let pool: SearchPool;
  let workspaceId: string;
  let personaId: string;

  beforeAll(async () => {
    // The app searches on the main thread; the pool below reads the same database file.
    t = await createTestApp({ env: { SWITCHBOARD_SEARCH_THREADS: '0' } });
    workspaceId = await workspaceOf(t);
    personaId = (await createPersona(t)).id;
    for (const [name, content] of ARTICLES) await addSource(t, { kind: 'text', name, content, metadata: { topic: name.toLowerCase() } });
    await addSource(t, { kind: 'text', name: 'Private refunds', content: 'Refunds for this persona only need a manager.', personaId });
    await t.ctx.services.knowledge.idle();
    const created = createSearchPool(
      1,
      {
        filename: path.join(t.dataDir, 'switchboard.db'),
        durability: 'normal',
        dimension: HASHED_DIMENSION,
        index: { keywordBudget: t.ctx.config.search.keywordBudget, cacheBytes: t.ctx.config.search.vectorCacheBytes },
        fusion: fusionFor('hashed'),
      },
      pino({ level: 'silent' }),
    );
    expect(created).not.toBeNull();
    pool = created!;
    pool.start();
    await waitFor(() => pool.ready, 10_000, 'the search thread to load');
  });

  afterAll(async () => {
    await pool?.close();
    await t?.close();
  });

  const onMain = (q: string, mode: SearchMode, extra: { personaId?: string; limit?: number } = {}) =>
    t.ctx.services.knowledge.search(workspaceId, { q, mode, limit: extra.limit ?? 5, personaId: extra.personaId });
  const onThread = async (q: string, mode: SearchMode, filter: Partial<SearchFilter> = {}, limit = 5) => {
    const result = await pool.search({ workspaceId, ...filter }, { q, mode, limit });
    // Null would mean the main thread had to take it: the thread must have answered.
    expect(result).not.toBeNull();
    return result!;
  };

  it('answers every mode exactly as the main thread does, persona scope included', async () => {
    for (const mode of MODES) {
      for (const q of QUERIES) {
        expect(await onThread(q, mode)).toEqual(await onMain(q, mode));
        expect(await onThread(q, mode, { personaId }, 3)).toEqual(await onMain(q, mode, { personaId, limit: 3 }));
      }
    }
    const refunds = await onThread('refunds', 'hybrid', { personaId });
    expect(refunds.data.map((h) => h.sourceName)).toEqual(expect.arrayContaining(['Refunds', 'Private refunds']));
    // Another persona sees only the shared one; another workspace sees nothing.
    const other = (await createPersona(t, { name: 'Bo' })).id;
    expect((await onThread('refunds', 'hybrid', { personaId: other })).data.map((h) => h.sourceName)).not.toContain('Private refunds');
    expect((await onThread('refunds', 'hybrid', { workspaceId: 'wsp_other' })).data).toEqual([]);
    expect((await onThread('refunds', 'keyword', { sourceIds: [] })).data).toEqual([]);
  });

  it('sees a source as soon as it is committed, and no longer after it is deleted', async () => {
    expect((await onThread('quokka migration', 'keyword')).data).toEqual([]);
    const source = await addSource(t, { kind: 'text', name: 'Quokkas', content: 'The quokka migration happens every spring on the island.' });
    await t.ctx.services.knowledge.idle();
    for (const mode of MODES) {
      const hits = (await onThread('quokka migration', mode)).data;
      expect(hits[0]?.sourceId, mode).toBe(source.id);
      expect(hits).toEqual((await onMain('quokka migration', mode)).data);
    }
    expect((await t.request({ method: 'DELETE', url: `/knowledge/${source.id}` })).statusCode).toBe(204);
    for (const mode of MODES) expect((await onThread('quokka migration', mode)).data.map((h) => h.sourceId)).not.toContain(source.id);
  });

  it('lets the event loop turn before a search on the main thread, as a thread’s answer does', async () => {
    // Else a caller searching in a loop starves timers, I/O and the chunk writer: ingestion stalls and
    // what waits for a turn piles up (knowledge-ingest-concurrency ran out of a 4 GB heap).
    for (const mode of MODES) {
      let turned = false;
      setImmediate(() => (turned = true));
      await onMain('refunds', mode);
      expect(turned, mode).toBe(true);
    }
  });

  it('answers many searches in flight, each with its own result', async () => {
    const asked = Array.from({ length: 60 }, (_, i) => QUERIES[i % QUERIES.length]!);
    const results = await Promise.all(asked.map((q) => onThread(q, 'hybrid')));
    for (const [i, q] of asked.entries()) expect(results[i]).toEqual(await onMain(q, 'hybrid'));
  });

  it('starts its thread on start(), before any search, and only once', async () => {
    const fresh = createSearchPool(
      1,
      { filename: path.join(t.dataDir, 'switchboard.db'), durability: 'normal', dimension: HASHED_DIMENSION, index: {}, fusion: fusionFor('hashed') },
      pino({ level: 'silent' }),
    )!;
    try {
      expect(fresh.running).toBe(0);
      fresh.start();
      fresh.start();
      expect(fresh.running).toBe(1);
      await waitFor(() => fresh.ready, 10_000, 'the search thread to load');
      expect((await fresh.search({ workspaceId }, { q: 'refunds', mode: 'keyword', limit: 5 }))?.data.length).toBeGreaterThan(0);
      expect(fresh.running).toBe(1);
    } finally {
      await fresh.close();
    }
    expect(fresh.running).toBe(0);
    fresh.start(); // closed: starts nothing
    expect(fresh.running).toBe(0);
  });

  it('starts its thread at the first search, which the main thread answers while the thread loads', async () => {
    const lazy = createSearchPool(
      1,
      { filename: path.join(t.dataDir, 'switchboard.db'), durability: 'normal', dimension: HASHED_DIMENSION, index: {}, fusion: fusionFor('hashed') },
      pino({ level: 'silent' }),
    )!;
    try {
      expect(lazy.running).toBe(0);
      // Not ready yet: null hands this search to the main thread, and the thread starts.
      expect(await lazy.search({ workspaceId }, { q: 'refunds', mode: 'keyword', limit: 1 })).toBeNull();
      expect(lazy.running).toBe(1);
      await waitFor(() => lazy.ready, 10_000, 'the search thread to load');
      expect((await lazy.search({ workspaceId }, { q: 'refunds', mode: 'keyword', limit: 1 }))?.data.length).toBe(1);
      expect(lazy.running).toBe(1);
    } finally {
      await lazy.close();
    }
    expect(lazy.ready).toBe(false);
  });

  it('hands searches back to the main thread once closed', async () => {
    const closing = createSearchPool(
      1,
      { filename: path.join(t.dataDir, 'switchboard.db'), durability: 'normal', dimension: HASHED_DIMENSION, index: {}, fusion: fusionFor('hashed') },
      pino({ level: 'silent' }),
    )!;
    closing.start();
    await waitFor(() => closing.ready, 10_000, 'the search thread to load');
    expect(await closing.search({ workspaceId }, { q: 'refunds', mode: 'keyword', limit: 1 })).not.toBeNull();
    await closing.close();
    expect(await closing.search({ workspaceId }, { q: 'refunds', mode: 'keyword', limit: 1 })).toBeNull();
  });
});

describe('an app with a search thread', () => {
  let t: TestApp;
  afterAll(async () => t?.close());

  it('serves GET /knowledge/search and chat retrieval when configured with one (the wiring; the thread answers are checked above)', async () => {
    t = await createTestApp({ env: { SWITCHBOARD_SEARCH_THREADS: '1' } });
    const persona = await createPersona(t);
    await addSource(t, { kind: 'text', name: 'Refunds', content: ARTICLES[0][1] });
    await t.ctx.services.knowledge.idle();
    const res = await t.request({ method: 'GET', url: '/knowledge/search?q=refunds%20card&mode=hybrid' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data[0]).toMatchObject({ sourceName: 'Refunds' });
    const answer = await t.request({ method: 'POST', url: '/query', body: { personaId: persona.id, message: 'When are refunds paid?' } });
    expect(answer.statusCode, answer.body).toBe(200);
    expect(answer.json().sources[0]).toMatchObject({ sourceName: 'Refunds' });
  });
});
