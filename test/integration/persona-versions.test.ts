// API.md §3 persona versions: every change is an immutable numbered version with who made it, a PUT
// that changes nothing adds none, restoring makes a new version, answers record the version that
// gave them (analytics per version), and another workspace's persona is a 404 everywhere.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createPersona } from '../helpers/factories.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';
import { writeBarrier } from '../helpers/write-barrier.js';

describe.each(testBackends())('persona versions on $kind', (backend) => {
  let t: TestApp;
  let adminKeyId: string;
  // Two edits at once meet between their read and their write, on either backend.
  const race = writeBarrier();

  beforeAll(async () => {
    t = await createTestApp({ backend, overrides: { writeGate: race.gate } });
    adminKeyId = (await t.ctx.services.auth.authenticate(t.adminKey))!.id;
  });
  afterAll(async () => t?.close());

  const put = (id: string, body: Record<string, unknown>, as?: string) => t.request({ method: 'PUT', url: `/personas/${id}`, body, ...(as ? { as } : {}) });
  const versions = async (id: string, query = '') => {
    const res = await t.request({ method: 'GET', url: `/personas/${id}/versions${query}` });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { data: Array<Record<string, unknown> & { version: number }>; nextCursor: string | null };
  };

  it('keeps the create as version 1 and each change as the next, with who made it; a PUT that changes nothing adds none', async () => {
    const p = await createPersona(t, { name: 'Helper', instructions: 'Be brief.', traits: ['kind'] });
    expect(p.version).toBe(1);
    const v1 = await versions(p.id);
    expect(v1).toEqual({
      data: [{ version: 1, name: 'Helper', instructions: 'Be brief.', traits: ['kind'], model: null, temperature: null, maxTokens: null, tools: [], createdAt: p.createdAt, createdBy: adminKeyId }],
      nextCursor: null,
    });

    const changed = await put(p.id, { instructions: 'Be thorough.', temperature: 0.2 });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json()).toMatchObject({ version: 2, instructions: 'Be thorough.', temperature: 0.2 });

    // The same values again, and an empty body: no version, no new updatedAt.
    for (const body of [{ instructions: 'Be thorough.', temperature: 0.2 }, {}]) {
      const same = await put(p.id, body);
      expect(same.statusCode).toBe(200);
      expect(same.json()).toEqual(changed.json());
    }
    expect((await versions(p.id)).data.map((v) => v.version)).toEqual([2, 1]);

    const one = await t.request({ method: 'GET', url: `/personas/${p.id}/versions/1` });
    expect(one.json()).toMatchObject({ version: 1, instructions: 'Be brief.', temperature: null });
    expect((await t.request({ method: 'GET', url: `/personas/${p.id}/versions/2` })).json()).toMatchObject({ version: 2, instructions: 'Be thorough.', createdBy: adminKeyId });
  });

  it('records another key as the author of its change', async () => {
    const p = await createPersona(t, { name: 'Shared' });
    const { key } = await t.ctx.services.auth.createKeyInWorkspace('default', 'editor', ['write']);
    expect((await put(p.id, { name: 'Shared 2' }, key.key)).statusCode).toBe(200);
    expect((await versions(p.id)).data.map((v) => [v.version, v.createdBy])).toEqual([
      [2, key.id],
      [1, adminKeyId],
    ]);
  });

  it('restores a version as a new one, and restoring what is current adds none', async () => {
    const p = await createPersona(t, { name: 'Tone', instructions: 'Formal.', tools: ['search.*'] });
    await put(p.id, { instructions: 'Casual.', tools: [] });
    await put(p.id, { instructions: 'Pirate.', maxTokens: 50 });
    const restored = await t.request({ method: 'POST', url: `/personas/${p.id}/versions/1/restore` });
    expect(restored.statusCode, restored.body).toBe(200);
    expect(restored.json()).toMatchObject({ version: 4, instructions: 'Formal.', tools: ['search.*'], maxTokens: null });
    expect((await t.request({ method: 'GET', url: `/personas/${p.id}` })).json()).toEqual(restored.json());
    const again = await t.request({ method: 'POST', url: `/personas/${p.id}/versions/1/restore` });
    expect(again.json()).toEqual(restored.json());
    expect((await versions(p.id)).data.map((v) => [v.version, v.instructions])).toEqual([
      [4, 'Formal.'],
      [3, 'Pirate.'],
      [2, 'Casual.'],
      [1, 'Formal.'],
    ]);
  });

  it('pages newest first by cursor and refuses a cursor it did not give', async () => {
    const p = await createPersona(t, { name: 'Pages' });
    for (let i = 2; i <= 5; i++) await put(p.id, { instructions: `Edit ${i}.` });
    const seen: number[] = [];
    let cursor: string | null = null;
    do {
      const page = await versions(p.id, `?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      seen.push(...page.data.map((v) => v.version));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual([5, 4, 3, 2, 1]);
    expectProblem(await t.request({ method: 'GET', url: `/personas/${p.id}/versions?cursor=bm9wZQ` }), 400, 'validation_failed', 'cursor');
    expectProblem(await t.request({ method: 'GET', url: `/personas/${p.id}/versions?limit=0` }), 400, 'validation_failed', 'limit');
  });

  it('answers 404 for a version it never had, a version that is not a number, and another workspace’s persona', async () => {
    const p = await createPersona(t, { name: 'Mine' });
    for (const n of ['2', '0', 'abc', '1.5', '-1', '99999999999']) {
      expectProblem(await t.request({ method: 'GET', url: `/personas/${p.id}/versions/${n}` }), 404, 'not_found');
      expectProblem(await t.request({ method: 'POST', url: `/personas/${p.id}/versions/${n}/restore` }), 404, 'not_found');
    }
    const other = (await t.ctx.services.auth.createWorkspace('other-versions')).key.key;
    for (const [method, url] of [
      ['GET', `/personas/${p.id}/versions`],
      ['GET', `/personas/${p.id}/versions/1`],
      ['POST', `/personas/${p.id}/versions/1/restore`],
    ] as const) {
      expectProblem(await t.request({ method, url, as: other }), 404, 'not_found');
    }
    expect((await versions(p.id)).data).toHaveLength(1);
  });

  it('lets two edits at once both land as consecutive versions, neither lost', async () => {
    const p = await createPersona(t, { name: 'Raced' });
    // Both read version 1 before either writes: the one that loses starts again from what the other left.
    race.arm('persona.edit');
    const [x, y] = await Promise.all([put(p.id, { instructions: 'From x.' }), put(p.id, { traits: ['from y'] })]);
    expect(race.state.held).toBe(2);
    expect([x.statusCode, y.statusCode], `${x.body} ${y.body}`).toEqual([200, 200]);
    expect([x.json().version, y.json().version].sort()).toEqual([2, 3]);
    const latest = (await t.request({ method: 'GET', url: `/personas/${p.id}` })).json();
    expect(latest).toMatchObject({ version: 3, instructions: 'From x.', traits: ['from y'] });
  });

  it('records the version that gave each answer, and breaks analytics down by version', async () => {
    const p = await createPersona(t, { name: 'Counted', instructions: 'First.' });
    const ask = async () => {
      const res = await t.request({ method: 'POST', url: '/query', body: { personaId: p.id, message: 'Hello?' } });
      expect(res.statusCode, res.body).toBe(200);
      return res.json() as { sessionId: string };
    };
    const first = await ask();
    await t.request({ method: 'POST', url: `/sessions/${first.sessionId}/feedback`, body: { rating: 2 } });
    await put(p.id, { instructions: 'Second.' });
    for (let i = 0; i < 2; i++) {
      const s = await ask();
      await t.request({ method: 'POST', url: `/sessions/${s.sessionId}/feedback`, body: { rating: 5 } });
    }
    const report = await t.request({ method: 'GET', url: `/business/analytics/versions?personaId=${p.id}&timeframe=1d` });
    expect(report.statusCode, report.body).toBe(200);
    expect(report.json().versions.map((v: Record<string, unknown>) => [v.version, v.answers, v.satisfaction])).toEqual([
      [2, 2, { average: 5, count: 2 }],
      [1, 1, { average: 2, count: 1 }],
    ]);
    const exported = await t.request({ method: 'POST', url: '/business/analytics/export', body: { timeframe: '1d', dataset: 'answers', format: 'json' } });
    const mine = (exported.json() as Array<{ personaId: string; personaVersion: number }>).filter((r) => r.personaId === p.id).map((r) => r.personaVersion);
    expect(mine).toEqual([1, 2, 2]);
    expectProblem(await t.request({ method: 'GET', url: '/business/analytics/versions?timeframe=1d' }), 400, 'validation_failed', 'personaId');
    expectProblem(await t.request({ method: 'GET', url: '/business/analytics/versions?personaId=per_nope' }), 404, 'not_found');
  });

  it('deletes a persona’s versions with it', async () => {
    const p = await createPersona(t, { name: 'Gone' });
    await put(p.id, { name: 'Gone 2' });
    expect((await t.request({ method: 'DELETE', url: `/personas/${p.id}` })).statusCode).toBe(204);
    const left = await t.ctx.db.kysely.selectFrom('persona_versions').select('version').where('persona_id', '=', p.id).execute();
    expect(left).toEqual([]);
  });
});
