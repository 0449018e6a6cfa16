// A knowledge source acknowledged with 202 survives kill -9 of the built server at any point of its
// processing: the next start resumes it to `ready`, never lost, never stuck, never failed, its chunks
// indexed exactly once. Real processes, 127.0.0.1 sockets, a real SIGKILL mid-ingestion.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import * as sqliteVec from 'sqlite-vec';
import { afterAll, describe, expect, it } from 'vitest';
import { generateKeySecret } from '../../src/core/auth/keys.js';
import { tempDir } from '../helpers/app.js';
import { type BuiltServer as Server, builtServers } from '../helpers/built-server.js';



/** Every paragraph carries the source's own token: a keyword search for it finds only that source's chunks. */
const content = (token: string, paragraphs: number) =>
  Array.from({ length: paragraphs }, (_, p) => `Survey ${p} of ${token}: the numbat colony fed on termites along the granite ridge at dusk.`).join('\n\n');

describe('knowledge ingestion across kill -9 (built server)', { timeout: 90_000 }, () => {
  const dataDir = tempDir('switchboard-ingest-durability-');
  const key = generateKeySecret();
  // A page on loopback that does not answer while `holding`: a URL source fetching it is mid-processing
  // for as long as the test wants, however fast the rest of ingestion is.
  let holding = true;
  let heldRequests = 0;
  const page = http.createServer((_req, res) => {
    if (holding) {
      heldRequests++;
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(content('zkheldq', 200));
  });
  afterAll(async () => {
    killAll();
    page.closeAllConnections();
    await new Promise<void>((resolve) => page.close(() => resolve()));
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const { serve, killAll } = builtServers({ dataDir, adminKey: key, env: { SWITCHBOARD_ALLOW_PRIVATE_URLS: '1' } });

  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const get = async (server: Server, url: string) => {
    const res = await fetch(`${server.url}${url}`, { headers, signal: AbortSignal.timeout(10_000) });
    expect(res.status, url).toBe(200);
    return res.json() as Promise<any>;
  };

  it('resumes every acknowledged source to ready after SIGKILL mid-ingestion; chunks indexed once', async () => {
    const first = await serve();
    // Queued sources (> 64 KiB): together a few seconds of work, so the kill lands mid-ingestion.
    const large = Array.from({ length: 16 }, (_, i) => `zkbig${i}q`);
    const acked = new Map<string, string>(); // token -> source id, only for 202s received
    const post = async (token: string, paragraphs: number) => {
      const res = await fetch(`${first.url}/knowledge`, { method: 'POST', headers, body: JSON.stringify({ kind: 'text', name: token, content: content(token, paragraphs) }) });
      expect(res.status).toBe(202);
      const body = (await res.json()) as { id: string; status: string };
      acked.set(token, body.id);
      return body;
    };
    for (const token of large) expect((await post(token, 2_000)).status).toBe('processing');
    // Queued behind them: a URL source whose page is held, so it is still processing at the kill.
    await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
    const held = await fetch(`${first.url}/knowledge`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ kind: 'url', name: 'zkheldq', url: `http://127.0.0.1:${(page.address() as AddressInfo).port}/page` }),
    });
    expect(held.status).toBe(202);
    acked.set('zkheldq', ((await held.json()) as { id: string }).id);
    // Small sources processed inside their requests, still being sent when the kill comes (those not
    // answered by then are not acknowledged, but are in the database and must not be stuck either).
    let sending = true;
    const small = (async () => {
      for (let i = 0; sending; i++) await post(`zksmall${i}q`, 30).catch(() => (sending = false));
    })();
    // Kill once queued sources are being done (the held page asked for, some large source ready) and
    // small ones have been answered: mid-ingestion, whatever the machine's speed.
    const deadline = Date.now() + 30_000;
    let states: string[] = [];
    for (;;) {
      states = await Promise.all(large.map(async (t) => (await get(first, `/knowledge/${acked.get(t)}`)).status as string));
      if ((states.includes('ready') && heldRequests > 0 && acked.size > large.length + 3) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const heldState = (await get(first, `/knowledge/${acked.get('zkheldq')}`)).status as string;
    first.child.kill('SIGKILL');
    await first.exited;
    sending = false;
    await small;
    expect(states).toContain('ready');
    expect(heldRequests).toBeGreaterThan(0);
    expect(heldState).toBe('processing'); // the kill came mid-ingestion
    expect(acked.size).toBeGreaterThan(large.length + 1);
    holding = false; // the page answers the restarted server

    const second = await serve();
    try {
      // Resumed at start: everything ends ready, within a bound. Every source is text the server
      // can read, and the held page answers now, so `failed` would mean work lost to the kill.
      const until = Date.now() + 60_000;
      while ((await get(second, '/knowledge?status=processing&limit=1')).data.length > 0) {
        expect(Date.now(), 'sources still processing after 60 s').toBeLessThan(until);
        await new Promise((r) => setTimeout(r, 50));
      }
      for (const [token, id] of acked) {
        const source = await get(second, `/knowledge/${id}`);
        expect(source.status, `${token}: ${source.status} ${source.error}`).toBe('ready');
        expect(source.chunkCount).toBeGreaterThan(0);
        const hits = (await get(second, `/knowledge/search?mode=keyword&limit=50&q=${token}`)).data as { chunkId: string; sourceId: string }[];
        expect(new Set(hits.map((h) => h.sourceId)), token).toEqual(new Set([id]));
        expect(new Set(hits.map((h) => h.chunkId)).size, token).toBe(hits.length);
        expect(hits.length, token).toBe(Math.min(50, source.chunkCount));
      }
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
    // Exactly once, in every index: each ready source's chunk rows match its count, with no position
    // twice, and the keyword and vector indexes hold one row per chunk.
    const db = new SqliteDatabase(path.join(dataDir, 'switchboard.db'), { readonly: true });
    sqliteVec.load(db);
    try {
      const count = (sql: string) => db.prepare(sql).pluck().get() as number;
      expect(count(`SELECT count(*) FROM knowledge_sources WHERE status = 'processing'`)).toBe(0);
      const perSource = db
        .prepare(`SELECT s.id, s.status, s.chunk_count AS expected, count(c.rowid) AS chunks, count(DISTINCT c.position) AS positions
          FROM knowledge_sources s LEFT JOIN knowledge_chunks c ON c.source_id = s.id GROUP BY s.id`)
        .all() as { id: string; status: string; expected: number; chunks: number; positions: number }[];
      expect(perSource.length).toBeGreaterThanOrEqual(acked.size);
      for (const s of perSource) {
        expect(s.chunks, s.id).toBe(s.status === 'ready' ? s.expected : 0);
        expect(s.positions, s.id).toBe(s.chunks);
      }
      const chunks = count('SELECT count(*) FROM knowledge_chunks');
      expect(chunks).toBe(perSource.reduce((a, s) => a + s.chunks, 0));
      expect(count('SELECT count(*) FROM knowledge_fts')).toBe(chunks);
      expect(count('SELECT count(*) FROM knowledge_vec')).toBe(chunks);
      expect(count('SELECT count(*) FROM knowledge_codes')).toBe(chunks);
    } finally {
      db.close();
    }
  });
});
