// The permission table against every operation of the OpenAPI document (issue 41, API.md §14):
// - each operation's `security` names the role it needs; the whole table is pinned in
//   test/fixtures/permissions.txt, so a route whose requirement changes shows up in review;
// - every role, signed in with a real cookie, against every operation: 403 exactly when the role
//   is below the operation's (generated from the document, not a hand-picked list);
// - every operation that changes something, with a cookie and no X-CSRF-Token: 403.
// Requests carry no body: the role and CSRF checks run before a body is read, and an allowed
// request then fails validation or finds nothing, which is anything but 403.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { atLeast, ROLES, type Role } from '../../src/core/auth/roles.js';
import { hashPassword } from '../../src/core/people/passwords.js';
import { createPeopleStore } from '../../src/core/people/people.store.js';
import { createTestApp, TEST_SCRYPT, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';

const FIXTURE = path.resolve(import.meta.dirname, '../fixtures/permissions.txt');

interface Operation {
  method: string;
  path: string;
  role: Role | 'public';
  /** The sign-in cookie is one of its schemes (not on `/mcp`: keys and OAuth tokens only). */
  cookie: boolean;
}

/** Every operation of the document with the role its `security` names. */
function operationsOf(doc: { paths: Record<string, Record<string, { security?: Record<string, string[]>[] }>> }): Operation[] {
  const out: Operation[] = [];
  for (const [p, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const security = op.security;
      expect(security, `${method} ${p} has no security requirement`).toBeDefined();
      if (security!.length === 0) {
        out.push({ method: method.toUpperCase(), path: p, role: 'public', cookie: false });
        continue;
      }
      const roles = new Set(security!.flatMap((s) => Object.values(s).flat()));
      expect(roles.size, `${method} ${p}: ${JSON.stringify(security)}`).toBe(1);
      out.push({ method: method.toUpperCase(), path: p, role: [...roles][0] as Role, cookie: security!.some((s) => 'cookie' in s) });
    }
  }
  return out.sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
}

/** A concrete URL for a documented path: every parameter an id nothing has. */
const urlOf = (p: string) => p.replace(/\{[^}]+\}/g, 'nope_0000');

// ~110 operations × 5 roles: a bounded count of requests, slow only on a loaded machine.
describe.each(testBackends())('permissions on $kind', { timeout: 180_000 }, (backend) => {
  let t: TestApp;
  let ops: Operation[];
  const cookies = new Map<Role, { cookie: string; csrf: string }>();
  let workspaceId: string;

  beforeAll(async () => {
    t = await createTestApp({ backend });
    ops = operationsOf((await t.request({ method: 'GET', url: '/openapi.json', as: null })).json());
    workspaceId = (await t.request({ method: 'GET', url: '/auth/me' })).json().workspace.id as string;
    const people = createPeopleStore(t.ctx.db.kysely);
    const at = new Date().toISOString();
    for (const role of ROLES) {
      const id = `usr_perm${role}`;
      await people.insertUser({ id, email: `${role}@example.com`, email_key: `${role}@example.com`, name: role, status: 'active', password: await hashPassword('correct horse battery', TEST_SCRYPT), created_at: at, last_seen_at: null });
      await people.insertMembership({ workspace_id: workspaceId, user_id: id, role, joined_at: at });
      const started = await t.ctx.services.loginSessions.start(id, workspaceId, 'password', undefined);
      cookies.set(role, { cookie: `sb_session=${started.token}`, csrf: started.csrfToken });
    }
  });
  afterAll(async () => t?.close());

  it('names one role per operation, as test/fixtures/permissions.txt pins them', () => {
    const table = ops.map((o) => `${o.method} ${o.path} ${o.role}`).join('\n') + '\n';
    expect(table).toBe(fs.readFileSync(FIXTURE, 'utf8'));
  });

  it('refuses a signed-in role exactly below each operation\'s', async () => {
    const wrong: string[] = [];
    // Signing out ends the cookie the rest of the matrix uses: those operations go last.
    const signsOut = (op: Operation) => op.method === 'DELETE' && op.path.startsWith('/auth/sessions');
    for (const op of [...ops.filter((o) => !signsOut(o)), ...ops.filter(signsOut)]) {
      if (op.role === 'public') continue;
      for (const role of ROLES) {
        const { cookie, csrf } = cookies.get(role)!;
        const res = await t.request({ method: op.method as 'GET', url: urlOf(op.path), as: null, headers: { cookie, 'x-csrf-token': csrf } });
        const denied = res.statusCode === 403;
        if (denied === atLeast(role, op.role)) wrong.push(`${op.method} ${op.path} as ${role} (needs ${op.role}): ${res.statusCode} ${res.body.slice(0, 160)}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('refuses every change made with a cookie and no CSRF token, even by an owner', async () => {
    // A session of its own: the matrix above signs its sessions out.
    const { token, csrfToken } = await t.ctx.services.loginSessions.start('usr_permowner', workspaceId, 'password', undefined);
    const cookie = `sb_session=${token}`;
    const wrong: string[] = [];
    for (const op of ops) {
      if (op.role === 'public' || op.method === 'GET') continue;
      const res = await t.request({ method: op.method as 'POST', url: urlOf(op.path), as: null, headers: { cookie } });
      if (!op.cookie) {
        // Not a credential there at all, with or without the token.
        const signed = await t.request({ method: op.method as 'POST', url: urlOf(op.path), as: null, headers: { cookie, 'x-csrf-token': csrfToken } });
        if (res.statusCode !== 401 || signed.statusCode !== 401) wrong.push(`${op.method} ${op.path} takes no cookie: ${res.statusCode}, ${signed.statusCode} with the token`);
        continue;
      }
      if (res.statusCode !== 403 || !res.body.includes('X-CSRF-Token')) wrong.push(`${op.method} ${op.path}: ${res.statusCode}`);
      const forged = await t.request({ method: op.method as 'POST', url: urlOf(op.path), as: null, headers: { cookie, 'x-csrf-token': 'not-the-token' } });
      if (forged.statusCode !== 403) wrong.push(`${op.method} ${op.path} with a wrong token: ${forged.statusCode}`);
    }
    expect(wrong).toEqual([]);
  });
});
