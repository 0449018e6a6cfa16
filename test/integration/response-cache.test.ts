import { systemActor } from '../../src/core/auth/actor.js';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';

describe('response cache of persona reads', () => {
  let t: TestApp;
  let id: string;
  beforeAll(async () => {
    t = await createTestApp();
    id = (await t.request({ method: 'POST', url: '/personas', body: { name: 'Cached', instructions: 'i' } })).json().id;
  });
  afterAll(async () => t.close());

  const list = () => t.request({ method: 'GET', url: '/personas' });
  const names = async () => (await list()).json().data.map((p: { name: string }) => p.name);

  it('answers repeats identically, with an ETag, and 304 for If-None-Match', async () => {
    const a = await list();
    const b = await list();
    expect(b.body).toBe(a.body);
    expect(a.headers.etag).toMatch(/^"[\w-]+"$/);
    expect(b.headers.etag).toBe(a.headers.etag);
    expect(b.headers['content-type']).toBe(a.headers['content-type']);
    const notModified = await t.request({ method: 'GET', url: '/personas', headers: { 'if-none-match': a.headers.etag as string } });
    expect(notModified.statusCode).toBe(304);
    expect(notModified.body).toBe('');
    const one = await t.request({ method: 'GET', url: `/personas/${id}` });
    const fresh = await t.request({ method: 'GET', url: `/personas/${id}`, headers: { 'if-none-match': one.headers.etag as string, 'cache-control': 'no-cache' } });
    expect(fresh.statusCode).toBe(304); // revalidated against a fresh read, still unchanged
  });

  it('never serves a stale answer after a write through the API or a service', async () => {
    await names();
    await t.request({ method: 'PUT', url: `/personas/${id}`, body: { name: 'Renamed' } });
    expect(await names()).toEqual(['Renamed']);
    expect((await t.request({ method: 'GET', url: `/personas/${id}` })).json().name).toBe('Renamed');

    const ws = (await t.request({ method: 'GET', url: '/auth/me' })).json().workspace.id;
    await t.ctx.services.personas.update(systemActor(ws), id, { name: 'By service' });
    expect(await names()).toEqual(['By service']);
  });

  it('never serves a stale answer after another process writes the database', async () => {
    await names();
    const other = new SqliteDatabase(path.join(t.dataDir, 'switchboard.db'));
    try {
      other.prepare("UPDATE personas SET name = 'By another process' WHERE id = ?").run(id);
    } finally {
      other.close();
    }
    expect(await names()).toEqual(['By another process']);
  });

  it('keeps workspaces apart for the same URL', async () => {
    const other = (await t.ctx.services.auth.createWorkspace('cache-other')).key.key;
    await names();
    const theirs = await t.request({ method: 'GET', url: '/personas', as: other });
    expect(theirs.json().data).toEqual([]);
    expect((await t.request({ method: 'GET', url: `/personas/${id}`, as: other })).statusCode).toBe(404);
  });

  it('still checks the key and its scope before a cached answer', async () => {
    await names();
    expect((await t.request({ method: 'GET', url: '/personas', as: null })).statusCode).toBe(401);
    expect((await t.request({ method: 'GET', url: '/personas', as: `sb_${'x'.repeat(40)}` })).statusCode).toBe(401);
  });
});
