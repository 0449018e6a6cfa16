// Shared by the knowledge integration tests (API.md §4): fixtures, multipart bodies, small request helpers.
import fs from 'node:fs';
import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { TestApp } from '../helpers/app.js';

export const FIXTURES = new URL('../fixtures/knowledge/', import.meta.url);

export function fixture(name: string): Buffer {
  return fs.readFileSync(new URL(name, FIXTURES));
}

export interface Part {
  name: string;
  value: string | Buffer;
  filename?: string;
  type?: string;
}

/** A multipart/form-data body written by hand (CRLF, one boundary), so tests control every byte. */
export function multipart(parts: Part[]): { payload: Buffer; contentType: string } {
  const boundary = '----switchboard-test-boundary-7d3f';
  const chunks: Buffer[] = [];
  for (const p of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"`;
    if (p.filename !== undefined) head += `; filename="${p.filename}"`;
    head += '\r\n';
    if (p.type !== undefined) head += `Content-Type: ${p.type}\r\n`;
    chunks.push(Buffer.from(`${head}\r\n`), Buffer.isBuffer(p.value) ? p.value : Buffer.from(p.value), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { payload: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** Sends a multipart body with the admin key (or `as`). */
export function upload(t: TestApp, parts: Part[], opts: { method?: 'POST' | 'PUT'; url?: string; as?: string; headers?: Record<string, string> } = {}) {
  const { payload, contentType } = multipart(parts);
  return t.app.inject({
    method: opts.method ?? 'POST',
    url: opts.url ?? '/knowledge',
    headers: { authorization: `Bearer ${opts.as ?? t.adminKey}`, 'content-type': contentType, ...opts.headers },
    payload,
  });
}

export interface SearchParams {
  q: string;
  mode?: 'hybrid' | 'vector' | 'keyword';
  limit?: number | string;
  personaId?: string;
  filter?: string;
}

export function searchUrl(p: SearchParams): string {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(p)) if (v !== undefined) qs.set(k, String(v));
  return `/knowledge/search?${qs.toString()}`;
}

export const MODES = ['hybrid', 'vector', 'keyword'] as const;

/** Runs a search expecting 200 and returns its `data`. */
export async function search(t: TestApp, p: SearchParams, as?: string) {
  const res = await t.request({ method: 'GET', url: searchUrl(p), ...(as ? { as } : {}) });
  expect(res.statusCode, res.body).toBe(200);
  const body = res.json();
  expect(body.mode).toBe(p.mode ?? 'hybrid');
  return body.data as Array<{ chunkId: string; sourceId: string; sourceName: string; text: string; score: number; position: number; metadata: Record<string, unknown> }>;
}

/** Source ids in a search's results. */
export async function foundSources(t: TestApp, p: SearchParams, as?: string): Promise<Set<string>> {
  return new Set((await search(t, p, as)).map((h) => h.sourceId));
}

/** Row counts of the chunk table and both index tables: a deleted chunk must leave no index row behind. */
export function indexCounts(t: TestApp) {
  const count = (table: string) => t.ctx.sqlite().sqlite.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number;
  return { chunks: count('knowledge_chunks'), fts: count('knowledge_fts'), vec: count('knowledge_vec') };
}
