// API.md §4 over HTTP: JSON sources (create, get, list, validation, size limits) and their chunks.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/lib/clock.js';
import { sequentialIds } from '../../src/lib/ids.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { addSource, createPersona } from '../helpers/factories.js';
import { expectProblem } from '../helpers/problem.js';
import { fixture } from './knowledge-helpers.js';

const MD = fixture('sample.md').toString('utf8');
const HTML = fixture('sample.html').toString('utf8');

describe('knowledge sources over JSON (API.md §4)', { timeout: 15_000 }, () => {
  let t: TestApp;
  const clock = manualClock(new Date('2026-04-01T00:00:00.000Z'));
  beforeAll(async () => {
    t = await createTestApp({ overrides: { clock, ids: sequentialIds() } });
  });
  afterAll(async () => t.close());

  const add = async (body: Record<string, unknown>) => {
    clock.advance(1000);
    return addSource(t, body);
  };

  it('creates each JSON kind: 202, Location, ready at once, bytes, chunks and metadata', async () => {
    const cases = [
      { kind: 'text', name: 'Plain', content: 'Tea is brewed at ninety degrees for three minutes.', metadata: { team: 'support', n: 1 } },
      { kind: 'markdown', name: 'Guide', content: MD, metadata: { nested: { a: [1, 2] } } },
      { kind: 'html', name: 'Café manual', content: HTML },
    ];
    for (const body of cases) {
      clock.advance(1000);
      const res = await t.request({ method: 'POST', url: '/knowledge', body });
      expect(res.statusCode, res.body).toBe(202);
      const s = res.json();
      expect(s.id).toMatch(/^src_/);
      expect(res.headers.location).toBe(`/knowledge/${s.id}`);
      expect(s).toEqual({
        id: s.id,
        name: body.name,
        kind: body.kind,
        personaId: null,
        status: 'ready',
        error: null,
        bytes: Buffer.byteLength(body.content, 'utf8'),
        chunkCount: s.chunkCount,
        metadata: body.metadata ?? {},
        createdAt: clock.now().toISOString(),
        updatedAt: clock.now().toISOString(),
      });
      expect(s.chunkCount).toBeGreaterThan(0);
      const got = await t.request({ method: 'GET', url: `/knowledge/${s.id}` });
      expect(got.statusCode).toBe(200);
      expect(got.json()).toEqual(s);
    }
  });

  it('lists newest first with limit and cursor, filters by status and persona, and is served under /api', async () => {
    const persona = (await createPersona(t, { name: 'Lister' })).id;
    const a = await add({ kind: 'text', name: 'List A', content: 'alpha words here' });
    const b = await add({ kind: 'text', name: 'List B', content: 'beta words here', personaId: persona });
    // HTML with no readable text: processed at once, and failed.
    const failed = await add({ kind: 'html', name: 'Empty page', content: '<html><body><script>var x = 1;</script></body></html>' });
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatch(/text/i);
    expect(failed.chunkCount).toBe(0);

    const all = (await t.request({ method: 'GET', url: '/knowledge?limit=100' })).json();
    expect(all.nextCursor).toBeNull();
    const created = all.data.map((s: { createdAt: string }) => s.createdAt);
    expect(created).toEqual([...created].sort().reverse());
    expect(all.data.slice(0, 3).map((s: { id: string }) => s.id)).toEqual([failed.id, b.id, a.id]);

    // Paging walks the same list, two at a time, without gaps or repeats.
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await t.request({ method: 'GET', url: `/knowledge?limit=2${cursor ? `&cursor=${cursor}` : ''}` });
      expect(res.statusCode).toBe(200);
      const page = res.json();
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((s: { id: string }) => s.id));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual(all.data.map((s: { id: string }) => s.id));

    const failedOnly = (await t.request({ method: 'GET', url: '/knowledge?status=failed' })).json();
    expect(failedOnly.data.map((s: { id: string }) => s.id)).toEqual([failed.id]);
    const ready = (await t.request({ method: 'GET', url: '/knowledge?status=ready&limit=100' })).json();
    expect(ready.data.length).toBe(all.data.length - 1);
    expect(ready.data.every((s: { status: string }) => s.status === 'ready')).toBe(true);
    const mine = (await t.request({ method: 'GET', url: `/knowledge?personaId=${persona}` })).json();
    expect(mine.data.map((s: { id: string }) => s.id)).toEqual([b.id]);

    const api = await t.request({ method: 'GET', url: '/api/knowledge?limit=100' });
    expect(api.statusCode).toBe(200);
    expect(api.json()).toEqual(all);
    expect((await t.request({ method: 'GET', url: `/api/knowledge/${a.id}` })).json()).toEqual(a);
  });

  it('refuses bad list queries', async () => {
    expectProblem(await t.request({ method: 'GET', url: '/knowledge?bogus=1' }), 400, 'validation_failed', 'bogus');
    expectProblem(await t.request({ method: 'GET', url: '/knowledge?status=done' }), 400, 'validation_failed', 'status');
    expectProblem(await t.request({ method: 'GET', url: '/knowledge?limit=101' }), 400, 'validation_failed', 'limit');
    expectProblem(await t.request({ method: 'GET', url: '/knowledge?limit=0' }), 400, 'validation_failed', 'limit');
    expectProblem(await t.request({ method: 'GET', url: '/knowledge?cursor=garbage' }), 400, 'validation_failed', 'cursor');
    // An id in a query that does not exist in the workspace → 404 (API.md §1).
    expectProblem(await t.request({ method: 'GET', url: '/knowledge?personaId=per_nope' }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: '/knowledge?personaId=' }), 404, 'not_found');
  });

  it('validates the body and names the field', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ kind: 'text', name: 'n' }, 'content'],
      [{ kind: 'text', name: 'n', content: '' }, 'content'],
      [{ kind: 'text', content: 'x' }, 'name'],
      [{ kind: 'text', name: '   ', content: 'x' }, 'name'],
      [{ kind: 'text', name: 'n'.repeat(201), content: 'x' }, 'name'],
      [{ kind: 'text', name: 'n', content: 'x', id: 'src_mine' }, 'id'],
      [{ kind: 'text', name: 'n', content: 'x', workspaceId: 'wsp_x' }, 'workspaceId'],
      [{ kind: 'text', name: 'n', content: 'x', status: 'ready' }, 'status'],
      [{ kind: 'pdf', name: 'n', content: 'x' }, 'kind'],
      [{ kind: 'bogus', name: 'n', content: 'x' }, 'kind'],
      [{ name: 'n', content: 'x' }, 'kind'],
      [{ kind: 'text', name: 'n', content: 'x', metadata: 'team=a' }, 'metadata'],
      [{ kind: 'text', name: 'n', content: 'x', metadata: [1, 2] }, 'metadata'],
      [{ kind: 'text', name: 'n', content: 'x', metadata: null }, 'metadata'],
      [{ kind: 'text', name: 'n', content: 42 }, 'content'],
      [{ kind: 'url', name: 'n' }, 'url'],
      [{ kind: 'url', url: 'https://example.com/', content: 'x' }, 'content'],
    ];
    for (const [body, path] of cases) {
      const res = await t.request({ method: 'POST', url: '/knowledge', body });
      expectProblem(res, 400, 'validation_failed', path);
    }
    expectProblem(await t.request({ method: 'POST', url: '/knowledge', body: '{"kind":' }), 400, 'invalid_json');
    const before = (await t.request({ method: 'GET', url: '/knowledge?limit=100' })).json().data.length;
    expect(before).toBeGreaterThan(0);
    expect((await t.request({ method: 'GET', url: '/knowledge?limit=100' })).json().data.length).toBe(before);
  });

  it('answers 404 for a persona that does not exist or belongs to another workspace', async () => {
    const other = await t.ctx.services.auth.createWorkspace('other-personas');
    const foreign = (await createPersona(t, { name: 'Foreign' }, other.key.key)).id;
    for (const personaId of ['per_missing', foreign]) {
      const res = await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'n', content: 'x', personaId } });
      expectProblem(res, 404, 'not_found');
    }
    // personaId null is explicit "shared".
    const shared = await add({ kind: 'text', name: 'Shared', content: 'shared text', personaId: null });
    expect(shared.personaId).toBeNull();
  });

  it('queues a document over 64 KiB: 202 processing, then ready', async () => {
    const paragraph = 'The lighthouse keeper logs every passing ship in the harbour ledger. ';
    const content = Array.from({ length: 1100 }, (_, i) => `${paragraph}Entry ${i}.`).join('\n\n');
    expect(Buffer.byteLength(content)).toBeGreaterThan(64 * 1024);
    const s = await add({ kind: 'text', name: 'Ledger', content });
    expect(s.status).toBe('processing');
    expect(s.chunkCount).toBe(0);
    await t.ctx.services.knowledge.idle();
    const done = (await t.request({ method: 'GET', url: `/knowledge/${s.id}` })).json();
    expect(done).toMatchObject({ status: 'ready', error: null, bytes: Buffer.byteLength(content) });
    expect(done.chunkCount).toBeGreaterThan(10);
  });

  describe('chunks', () => {
    it('lists a markdown source’s chunks in document order with heading paths, and pages them', async () => {
      const s = await add({ kind: 'markdown', name: 'Guide', content: MD });
      const res = await t.request({ method: 'GET', url: `/knowledge/${s.id}/chunks?limit=100` });
      expect(res.statusCode).toBe(200);
      const { data, nextCursor } = res.json();
      expect(nextCursor).toBeNull();
      expect(data.length).toBe(s.chunkCount);
      expect(data.map((c: { position: number }) => c.position)).toEqual(data.map((_: unknown, i: number) => i));
      for (const c of data) {
        expect(Object.keys(c).sort()).toEqual(['headingPath', 'id', 'position', 'text', 'tokens']);
        expect(c.id).toMatch(/^chk_/);
        expect(c.tokens).toBeGreaterThan(0);
        expect(c.text.length).toBeGreaterThan(0);
      }
      const install = data.find((c: { text: string }) => c.text.includes('npm install switchboard'));
      expect(install.headingPath).toEqual(['Guide', 'Installation']);
      expect(data[0].headingPath).toEqual(['Guide']);
      expect(data[0].text).toContain('agent platform');
      expect(data.find((c: { text: string }) => c.text.includes('snake_case')).headingPath).toEqual(['Guide', 'Configuration', 'Environment']);
      expect(data.at(-1).headingPath).toEqual(['Usage']);

      const paged: unknown[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page: { data: unknown[]; nextCursor: string | null } = (await t.request({ method: 'GET', url: `/knowledge/${s.id}/chunks?limit=2${cursor ? `&cursor=${cursor}` : ''}` })).json();
        paged.push(...page.data);
        cursor = page.nextCursor;
        pages++;
      } while (cursor);
      expect(pages).toBe(Math.ceil(data.length / 2));
      expect(paged).toEqual(data);
      expect((await t.request({ method: 'GET', url: `/api/knowledge/${s.id}/chunks?limit=100` })).json().data).toEqual(data);
    });

    it('answers 404 for an unknown or foreign source, and 400 for bad queries', async () => {
      const s = await add({ kind: 'text', name: 'Mine', content: 'private words' });
      const other = await t.ctx.services.auth.createWorkspace('other-chunks');
      expectProblem(await t.request({ method: 'GET', url: `/knowledge/${s.id}/chunks`, as: other.key.key }), 404, 'not_found');
      expectProblem(await t.request({ method: 'GET', url: '/knowledge/src_missing/chunks' }), 404, 'not_found');
      expectProblem(await t.request({ method: 'GET', url: `/knowledge/src_${'x'.repeat(70)}/chunks` }), 404, 'not_found');
      expectProblem(await t.request({ method: 'GET', url: `/knowledge/${s.id}/chunks?bogus=1` }), 400, 'validation_failed', 'bogus');
      expectProblem(await t.request({ method: 'GET', url: `/knowledge/${s.id}/chunks?cursor=%21%21` }), 400, 'validation_failed', 'cursor');
    });
  });
});

describe('knowledge body limits (API.md §1 Limits)', { timeout: 15_000 }, () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  const big = (bytes: number) => 'lorem ipsum dolor sit amet '.repeat(Math.ceil(bytes / 27)).slice(0, bytes);

  it('takes knowledge bodies up to the upload limit, and no more; other routes keep 1 MiB', async () => {
    t = await createTestApp({ env: { SWITCHBOARD_UPLOAD_LIMIT_MB: '1' } });
    const tooBig = await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'Big', content: big(1_500_000) } });
    expectProblem(tooBig, 413, 'payload_too_large');
    const persona = await t.request({ method: 'POST', url: '/personas', body: { name: 'Big', instructions: big(1_500_000) } });
    expectProblem(persona, 413, 'payload_too_large');
    expect((await t.request({ method: 'GET', url: '/knowledge' })).json().data).toEqual([]);
    // Under the limit goes through (and is queued: it is over 64 KiB).
    const fits = await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'Fits', content: big(900_000) } });
    expect(fits.statusCode, fits.body).toBe(202);
    expect(fits.json().status).toBe('processing');
    const put = await t.request({ method: 'PUT', url: `/knowledge/${fits.json().id}`, body: { kind: 'text', content: big(1_500_000) } });
    expectProblem(put, 413, 'payload_too_large');
  });

  it('lets POST /knowledge exceed 1 MiB under the default limit while POST /personas may not', async () => {
    t = await createTestApp();
    const persona = await t.request({ method: 'POST', url: '/personas', body: { name: 'Big', instructions: big(1_500_000) } });
    expectProblem(persona, 413, 'payload_too_large');
    const knowledge = await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'Big', content: big(1_500_000) } });
    expect(knowledge.statusCode, knowledge.body).toBe(202);
    expect(knowledge.json()).toMatchObject({ status: 'processing', bytes: 1_500_000 });
    const put = await t.request({ method: 'PUT', url: `/knowledge/${knowledge.json().id}`, body: { kind: 'text', content: big(1_200_000) } });
    expect(put.statusCode, put.body).toBe(202);
    expect(put.json()).toMatchObject({ status: 'processing', bytes: 1_200_000 });
  });
});
