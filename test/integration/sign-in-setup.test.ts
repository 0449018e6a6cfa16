// The first owner (API.md §14 "First start"): the setup link every start prints while nobody has an
// account, and POST /auth/setup, which works once, also when setups race, on both backends.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli.js';
import { manualClock } from '../../src/lib/clock.js';
import { createTestApp, type TestApp, tempDir } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { expectProblem } from '../helpers/problem.js';

const OWNER = { email: 'Owner@Example.com', name: 'Olga Owner', password: 'a long enough password' };

describe.each(testBackends())('first-owner setup on $kind', (backend) => {
  let t: TestApp;
  let clock: ReturnType<typeof manualClock>;
  afterEach(async () => t?.close());

  async function start() {
    clock = manualClock(new Date('2026-03-01T09:00:00.000Z'));
    t = await createTestApp({ backend, overrides: { clock } });
  }
  const setup = (body: Record<string, unknown>) => t.request({ method: 'POST', url: '/auth/setup', as: null, body });
  const link = async () => (await t.ctx.services.signIn.setup.newLink())!.token;

  it('makes the owner of the default workspace once, signed in; then 409', async () => {
    await start();
    const token = await link();
    expectProblem(await setup({ ...OWNER, token: `sbi_${'x'.repeat(43)}` }), 401, 'unauthorized');
    expectProblem(await setup({ ...OWNER, token: 'nonsense' }), 401, 'unauthorized');
    expectProblem(await setup({ ...OWNER, token, password: 'short pw' }), 400, 'validation_failed', 'password');
    expectProblem(await setup({ ...OWNER, token, email: 'not an e-mail' }), 400, 'validation_failed', 'email');
    expectProblem(await setup({ token, email: OWNER.email, password: OWNER.password }), 400, 'validation_failed', 'name');
    expect(await t.ctx.db.kysely.selectFrom('users').select('id').execute()).toEqual([]);

    const res = await setup({ ...OWNER, token });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.headers['set-cookie']).toMatch(/^sb_session=sbs_[0-9A-Za-z]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=\d+$/);
    const body = res.json();
    expect(body).toMatchObject({ user: { email: OWNER.email, name: OWNER.name, status: 'active' }, memberships: [{ workspace: { name: 'default' }, role: 'owner' }] });
    const cookie = /sb_session=[^;]+/.exec(String(res.headers['set-cookie']))![0];
    const me = await t.request({ method: 'GET', url: '/auth/me', as: null, headers: { cookie } });
    expect(me.json()).toMatchObject({ user: { id: body.user.id }, workspace: { name: 'default' }, role: 'owner' });

    // The owner signs in with the password set; the token and any other setup are refused now.
    const signIn = await t.request({ method: 'POST', url: '/auth/sessions', as: null, body: { email: 'owner@example.com', password: OWNER.password } });
    expect(signIn.statusCode).toBe(201);
    expectProblem(await setup({ ...OWNER, token }), 409, 'conflict');
    expectProblem(await setup({ ...OWNER, email: 'other@example.com', token: `sbi_${'x'.repeat(43)}` }), 409, 'conflict');
    expect(await t.ctx.services.signIn.setup.newLink()).toBeNull();

    const events = await t.ctx.db.kysely.selectFrom('audit_events').selectAll().where('action', '=', 'member.setup').execute();
    expect(events).toEqual([expect.objectContaining({ actor_type: 'user', actor_id: body.user.id, target_type: 'member', target_id: body.user.id, outcome: 'success' })]);
  });

  it('a newer link replaces the unused one, and a link ends after 24 hours', async () => {
    await start();
    const first = await link();
    const second = await link();
    expectProblem(await setup({ ...OWNER, token: first }), 401, 'unauthorized');
    clock.advance(24 * 3_600_000);
    expectProblem(await setup({ ...OWNER, token: second }), 401, 'unauthorized');
    const third = await link();
    expect((await setup({ ...OWNER, token: third })).statusCode).toBe(201);
  });

  it('of setups racing, with one link or with two instances’ links, exactly one succeeds and the others are 409', async () => {
    await start();
    const token = await link();
    // Another instance started at the same moment: its link was made before this one could revoke it.
    const other = `sbi_${crypto.randomBytes(32).toString('base64url').replace(/[-_]/g, 'a').slice(0, 43)}`;
    const row = await t.ctx.db.kysely.selectFrom('invitations').selectAll().where('purpose', '=', 'setup').where('revoked_at', 'is', null).executeTakeFirstOrThrow();
    await t.ctx.db.kysely
      .insertInto('invitations')
      .values({ ...row, id: 'inv_other', token_hash: crypto.hash('sha256', other, 'hex') })
      .execute();
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) => setup({ ...OWNER, email: `owner${i}@example.com`, token: i % 2 === 0 ? token : other })),
    );
    expect(answers.map((r) => r.statusCode).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    expect(await t.ctx.db.kysely.selectFrom('users').select('id').execute()).toHaveLength(1);
    expect(await t.ctx.db.kysely.selectFrom('memberships').select('role').execute()).toEqual([{ role: 'owner' }]);
  });
});

describe('the start banner', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });

  async function serve(dataDir: string) {
    const out = { stderr: '', url: '', stop: undefined as undefined | (() => Promise<void>) };
    const code = await runCli(['serve'], {
      env: { SWITCHBOARD_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'silent' },
      stdout: () => {},
      stderr: (text: string) => void (out.stderr += text),
      onServing: (server: { url: string; stop: () => Promise<void> }) => {
        out.url = server.url;
        out.stop = server.stop;
      },
    });
    expect(code).toBe(0);
    return out;
  }
  const LINK = /(http:\/\/\S+)\/console\/setup#(sbi_[0-9A-Za-z]{43})/;

  it('prints a new setup link at every start while nobody has an account, and none after', async () => {
    const dataDir = tempDir('switchboard-setup-');
    dirs.push(dataDir);
    const first = await serve(dataDir);
    let firstToken: string;
    try {
      expect(first.stderr).toMatch(/sb_[0-9A-Za-z]{40}/); // the admin key, as before
      const m = LINK.exec(first.stderr);
      expect(m?.[1]).toBe(first.url);
      firstToken = m![2]!;
    } finally {
      await first.stop?.();
    }

    const second = await serve(dataDir);
    try {
      expect(second.stderr).not.toMatch(/sb_[0-9A-Za-z]{40}/);
      const token = LINK.exec(second.stderr)?.[2];
      expect(token).toBeDefined();
      expect(token).not.toBe(firstToken);
      const post = (t: string) =>
        fetch(`${second.url}/auth/setup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...OWNER, token: t }) });
      expect((await post(firstToken)).status).toBe(401);
      const made = await post(token!);
      expect(made.status).toBe(201);
      const cookie = /sb_session=[^;]+/.exec(made.headers.get('set-cookie') ?? '')![0];
      const me = await fetch(`${second.url}/auth/me`, { headers: { cookie } });
      expect(await me.json()).toMatchObject({ user: { email: OWNER.email }, role: 'owner' });
    } finally {
      await second.stop?.();
    }

    const third = await serve(dataDir);
    await third.stop?.();
    expect(third.stderr).not.toMatch(/setup#/);
  });
});
