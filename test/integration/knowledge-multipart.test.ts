// API.md §4: multipart/form-data uploads to POST and PUT /knowledge.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createPersona } from '../helpers/factories.js';
import { expectProblem } from '../helpers/problem.js';
import { fixture, foundSources, multipart, upload } from './knowledge-helpers.js';

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]);

describe('knowledge uploads (multipart)', { timeout: 15_000 }, () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => t.close());

  const kinds: [file: string, type: string, kind: string, word: string][] = [
    ['sample.pdf', 'application/pdf', 'pdf', 'passages'],
    ['sample.docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'docx', 'migrations'],
    ['sample.html', 'text/html', 'html', 'espresso'],
    ['sample.md', 'text/markdown', 'markdown', 'installation'],
    ['sample.txt', 'text/plain', 'text', 'ingestion'],
    ['sample.csv', 'text/csv', 'csv', 'lovelace'],
    ['sample.json', 'application/json', 'json', 'rotate'],
  ];

  it.each(kinds)('uploads %s as %s → ready, kind %s, searchable', async (file, type, kind, word) => {
    const data = fixture(file);
    const res = await upload(t, [{ name: 'file', value: data, filename: file, type }]);
    expect(res.statusCode, res.body).toBe(202);
    const s = res.json();
    expect(res.headers.location).toBe(`/knowledge/${s.id}`);
    expect(s).toMatchObject({ name: file, kind, status: 'ready', error: null, bytes: data.length, personaId: null, metadata: {} });
    expect(s.chunkCount).toBeGreaterThan(0);
    expect(await foundSources(t, { q: word, mode: 'keyword', limit: 50 })).toContain(s.id);
  });

  it('takes name, personaId and metadata parts; a .md sent as text/plain is still markdown', async () => {
    const persona = (await createPersona(t, { name: 'Uploader' })).id;
    const res = await upload(t, [
      { name: 'name', value: 'The guide' },
      { name: 'personaId', value: persona },
      { name: 'metadata', value: JSON.stringify({ team: 'docs', version: 2 }) },
      { name: 'file', value: fixture('sample.md'), filename: 'guide.md', type: 'text/plain' },
    ]);
    expect(res.statusCode, res.body).toBe(202);
    const s = res.json();
    expect(s).toMatchObject({ name: 'The guide', kind: 'markdown', personaId: persona, metadata: { team: 'docs', version: 2 }, status: 'ready' });
    const chunks = (await t.request({ method: 'GET', url: `/knowledge/${s.id}/chunks?limit=100` })).json().data;
    expect(chunks.some((c: { headingPath: string[] }) => c.headingPath.join('/') === 'Guide/Installation')).toBe(true);

    // An empty personaId part means shared; a FormData body (as browsers send it) works too.
    const form = new FormData();
    form.append('personaId', '');
    form.append('file', new Blob([fixture('sample.txt')], { type: 'application/octet-stream' }), 'notes.txt');
    const response = new Response(form);
    const shared = await t.app.inject({
      method: 'POST',
      url: '/api/knowledge',
      headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': response.headers.get('content-type')! },
      payload: Buffer.from(await response.arrayBuffer()),
    });
    expect(shared.statusCode, shared.body).toBe(202);
    expect(shared.json()).toMatchObject({ name: 'notes.txt', kind: 'text', personaId: null, status: 'ready' });
  });

  it('refuses unsupported files, missing and unknown parts, bad metadata and unknown personas', async () => {
    const file = { name: 'file', value: fixture('sample.txt'), filename: 'a.txt', type: 'text/plain' };
    const png = await upload(t, [{ name: 'file', value: PNG, filename: 'pic.png', type: 'image/png' }]);
    expectProblem(png, 415, 'unsupported_media_type');
    const noName = await upload(t, [{ name: 'file', value: PNG, type: 'application/octet-stream' }]);
    expectProblem(noName, 415, 'unsupported_media_type');

    expectProblem(await upload(t, [{ name: 'name', value: 'x' }]), 400, 'validation_failed', 'file');
    expectProblem(await upload(t, [{ name: 'file', value: 'just text' }]), 400, 'validation_failed', 'file');
    const unknown = expectProblem(await upload(t, [file, { name: 'owner', value: 'me' }]), 400, 'validation_failed', 'owner');
    expect(unknown.detail + JSON.stringify(unknown.errors)).toContain('owner');
    expectProblem(await upload(t, [{ name: 'workspaceId', value: 'wsp_x' }, file]), 400, 'validation_failed', 'workspaceId');
    expectProblem(await upload(t, [file, { name: 'metadata', value: '{not json' }]), 400, 'validation_failed', 'metadata');
    expectProblem(await upload(t, [file, { name: 'metadata', value: '[1,2]' }]), 400, 'validation_failed', 'metadata');
    // The same key rule as JSON metadata: 1–100 characters.
    expectProblem(await upload(t, [file, { name: 'metadata', value: '{"":1}' }]), 400, 'validation_failed', 'metadata');
    // A key too long is named, exactly as the JSON body names it.
    const longKey = { ['k'.repeat(101)]: 1 };
    expectProblem(await upload(t, [file, { name: 'metadata', value: JSON.stringify(longKey) }]), 400, 'validation_failed', `metadata.${'k'.repeat(101)}`);
    expectProblem(
      await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'n', content: 'c', metadata: longKey } }),
      400,
      'validation_failed',
      `metadata.${'k'.repeat(101)}`,
    );
    expectProblem(await upload(t, [file, { name: 'metadata', value: JSON.stringify({ k: 'v'.repeat(17_000) }) }]), 400, 'validation_failed', 'metadata');
    expectProblem(await upload(t, [file, { name: 'name', value: '  ' }]), 400, 'validation_failed', 'name');
    expectProblem(await upload(t, [file, { name: 'name', value: 'n'.repeat(201) }]), 400, 'validation_failed', 'name');
    expectProblem(await upload(t, [file, { name: 'personaId', value: 'per_missing' }]), 404, 'not_found');
    expectProblem(await upload(t, [{ ...file, value: Buffer.alloc(0) }]), 400, 'validation_failed', 'file');
    // Nothing of the above was stored.
    const names = (await t.request({ method: 'GET', url: '/knowledge?limit=100' })).json().data.map((s: { name: string }) => s.name);
    expect(names).not.toContain('a.txt');
    expect(names).not.toContain('pic.png');
  });

  it('names a source after its file, cut to 200 characters, or "Untitled <kind>" without one', async () => {
    const long = `${'x'.repeat(300)}.txt`;
    const named = await upload(t, [{ name: 'file', value: fixture('sample.txt'), filename: long, type: 'text/plain' }]);
    expect(named.statusCode, named.body).toBe(202);
    expect(named.json().name).toBe(long.slice(0, 200));
    const nameless = await upload(t, [{ name: 'file', value: fixture('sample.txt'), filename: '', type: 'text/plain' }]);
    expect(nameless.json()).toMatchObject({ name: 'Untitled text', kind: 'text', status: 'ready' });
  });

  it('a corrupt PDF answers 202 and ends failed with a readable error', async () => {
    const res = await upload(t, [{ name: 'file', value: fixture('corrupt.pdf'), filename: 'corrupt.pdf', type: 'application/pdf' }]);
    expect(res.statusCode, res.body).toBe(202);
    await t.ctx.services.knowledge.idle();
    const s = (await t.request({ method: 'GET', url: `/knowledge/${res.json().id}` })).json();
    expect(s).toMatchObject({ kind: 'pdf', status: 'failed', chunkCount: 0 });
    expect(s.error).toMatch(/PDF/);
    expect(s.error).not.toMatch(/\n\s+at |node_modules|\.js:\d+/);
    expect(s.error.length).toBeLessThan(500);
  });

  it('replaces a source’s content with PUT multipart, keeping its name unless one is sent', async () => {
    const first = (await upload(t, [{ name: 'file', value: fixture('sample.txt'), filename: 'notes.txt', type: 'text/plain' }])).json();
    const res = await upload(t, [{ name: 'file', value: fixture('sample.csv'), filename: 'people.csv', type: 'text/csv' }], { method: 'PUT', url: `/knowledge/${first.id}` });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json()).toMatchObject({ id: first.id, name: 'notes.txt', kind: 'csv', status: 'ready', bytes: fixture('sample.csv').length });
  });

  it('replays a multipart POST with the same Idempotency-Key and creates nothing new', async () => {
    const parts = [{ name: 'file', value: fixture('sample.txt'), filename: 'idem.txt', type: 'text/plain' }];
    const headers = { 'idempotency-key': 'upload-1' };
    const a = await upload(t, parts, { headers });
    const b = await upload(t, parts, { headers });
    expect(a.statusCode).toBe(202);
    expect(b.statusCode).toBe(202);
    expect(b.json().id).toBe(a.json().id);
    const other = await upload(t, [{ ...parts[0]!, value: fixture('sample.md') }], { headers });
    expectProblem(other, 409, 'conflict');
    const idem = (await t.request({ method: 'GET', url: '/knowledge?limit=100' })).json().data.filter((s: { name: string }) => s.name === 'idem.txt');
    expect(idem.length).toBe(1);
  });

  it('accepts multipart only on the knowledge routes', async () => {
    const { payload, contentType } = multipart([{ name: 'name', value: 'Ada' }, { name: 'instructions', value: 'x' }]);
    const res = await t.app.inject({ method: 'POST', url: '/personas', headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': contentType }, payload });
    expectProblem(res, 415, 'unsupported_media_type');
  });
});

describe('knowledge upload limit', { timeout: 15_000 }, () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('refuses a file over SWITCHBOARD_UPLOAD_LIMIT_MB with 413', async () => {
    t = await createTestApp({ env: { SWITCHBOARD_UPLOAD_LIMIT_MB: '1' } });
    const res = await upload(t, [{ name: 'file', value: Buffer.alloc(1_500_000, 'a'), filename: 'big.txt', type: 'text/plain' }]);
    expectProblem(res, 413, 'payload_too_large');
    expect((await t.request({ method: 'GET', url: '/knowledge' })).json().data).toEqual([]);
    // Just under the limit is taken.
    const fits = await upload(t, [{ name: 'file', value: Buffer.from('word '.repeat(200_000)), filename: 'fits.txt', type: 'text/plain' }]);
    expect(fits.statusCode, fits.body).toBe(202);
  });
});
