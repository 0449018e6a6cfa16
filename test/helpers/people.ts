// People in tests (issue 41): a user with a role, inserted through the stores, and a sign-in through
// the real `POST /auth/sessions` giving the cookie and CSRF headers later requests send.
import { expect } from 'vitest';
import type { Role } from '../../src/core/auth/roles.js';
import { hashPassword } from '../../src/core/people/passwords.js';
import { createPeopleStore, emailKey } from '../../src/core/people/people.store.js';
import { type Requester, TEST_SCRYPT, type TestApp } from './app.js';

/** The password `addPerson` gives when none is asked for (at least 12 characters). */
export const PASSWORD = 'correct horse battery staple';

export interface Person {
  id: string;
  email: string;
  name: string;
  password: string;
  workspaceId: string;
  role: Role;
}

/**
 * A member of `workspaceId` (default: the default workspace) with `role`: the user is made when the
 * e-mail is new, else the existing user joins the workspace.
 */
export async function addPerson(
  t: Pick<TestApp, 'ctx'>,
  options: { email: string; role: Role; password?: string; workspaceId?: string; name?: string; status?: 'active' | 'disabled' },
): Promise<Person> {
  const store = createPeopleStore(t.ctx.db.kysely);
  const workspaceId = options.workspaceId ?? (await t.ctx.services.auth.findWorkspace('default'))?.id;
  if (!workspaceId) throw new Error('no default workspace');
  const password = options.password ?? PASSWORD;
  const now = t.ctx.clock.now().toISOString();
  let user = await store.findUserByEmail(options.email);
  if (!user) {
    user = {
      id: t.ctx.ids('usr'),
      email: options.email,
      email_key: emailKey(options.email),
      name: options.name ?? options.email.split('@')[0]!,
      status: options.status ?? 'active',
      password: await hashPassword(password, TEST_SCRYPT),
      created_at: now,
      last_seen_at: null,
    };
    await store.insertUser(user);
  }
  await store.insertMembership({ workspace_id: workspaceId, user_id: user.id, role: options.role, joined_at: now });
  return { id: user.id, email: user.email, name: user.name, password, workspaceId, role: options.role };
}

export interface SignedIn {
  /** `sb_session=<token>`, for a Cookie header. */
  cookie: string;
  /** The session cookie's secret. */
  token: string;
  csrfToken: string;
  /** The `SignedIn` body. */
  body: { user: { id: string; email: string }; memberships: { workspace: { id: string; name: string }; role: Role }[]; csrfToken: string };
  /** The Set-Cookie header as answered. */
  setCookie: string;
  /** Headers of a request as this person: the cookie, and for a request that changes something the CSRF token. */
  headers(forWrite?: boolean): Record<string, string>;
}

/** Signs in through `POST /auth/sessions` (a TestApp or the built server's client); fails the test unless 201. */
export async function signIn(t: Requester, email: string, password: string = PASSWORD, workspace?: string): Promise<SignedIn> {
  const res = await t.request({ method: 'POST', url: '/auth/sessions', as: null, body: { email, password, ...(workspace ? { workspace } : {}) } });
  expect(res.statusCode, res.body).toBe(201);
  const setCookie = String(res.headers['set-cookie']);
  const token = /sb_session=([^;]+)/.exec(setCookie)?.[1];
  if (!token) throw new Error(`no session cookie in ${setCookie}`);
  const body = res.json() as SignedIn['body'];
  const cookie = `sb_session=${token}`;
  return {
    cookie,
    token,
    csrfToken: body.csrfToken,
    body,
    setCookie,
    headers: (forWrite = false) => ({ cookie, ...(forWrite ? { 'x-csrf-token': body.csrfToken } : {}) }),
  };
}
