/** One factory per object (DESIGN.md): each creates through the HTTP API and expects success. */
import { expect } from 'vitest';
import type { Team } from '../../src/business/teams/teams.schemas.js';
import type { AbTest } from '../../src/business/ab-tests/ab-tests.schemas.js';
import type { Channel } from '../../src/business/channels/channels.schemas.js';
import type { Persona } from '../../src/core/personas/personas.schemas.js';
import type { Insertable } from 'kysely';
import type { FeedbackTable, InteractionsTable } from '../../src/db/schema.js';
import type { Requester, TestApp } from './app.js';

/** POST /personas with defaults for what is not given; `as` is another key (default the admin key). */
export async function createPersona(t: Requester, fields: Record<string, unknown> = {}, as?: string): Promise<Persona> {
  const res = await t.request({ method: 'POST', url: '/personas', body: { name: 'Ada', instructions: 'Answer briefly.', ...fields }, ...(as ? { as } : {}) });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as Persona;
}

/** POST /knowledge (JSON) expecting 202, returning the source. */
export async function addSource(t: Requester, body: Record<string, unknown>, as?: string) {
  const res = await t.request({ method: 'POST', url: '/knowledge', body, ...(as ? { as } : {}) });
  expect(res.statusCode, res.body).toBe(202);
  return res.json();
}

/**
 * Team members are people of the workspace (API.md §14): with a TestApp at hand, each e-mail named
 * that is nobody yet becomes a user and a member (role `agent`) of the key's workspace, through the
 * stores, so a test can name members by e-mail as before. Answers their user ids by e-mail (lower case).
 */
export async function ensureMembers(t: Requester, emails: string[], as?: string): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  if (!('ctx' in t)) return ids;
  const app = t as TestApp;
  const actor = await app.ctx.services.auth.authenticate(as ?? app.adminKey);
  if (!actor) throw new Error('ensureMembers: the key is unknown');
  const db = app.ctx.db.kysely;
  const at = new Date().toISOString();
  for (const email of emails.filter((e) => e.includes('@'))) {
    const key = email.trim().toLowerCase();
    let user = await db.selectFrom('users').select('id').where('email_key', '=', key).executeTakeFirst();
    if (!user) {
      user = { id: app.ctx.ids('usr') };
      await db.insertInto('users').values({ id: user.id, email: email.trim(), email_key: key, name: email.split('@')[0]!, status: 'active', password: null, created_at: at, last_seen_at: null }).execute();
    }
    await db
      .insertInto('memberships')
      .values({ workspace_id: actor.workspaceId, user_id: user.id, role: 'agent', joined_at: at })
      .onConflict((oc) => oc.columns(['workspace_id', 'user_id']).doNothing())
      .execute();
    ids.set(key, user.id);
  }
  return ids;
}

/** POST /business/teams with defaults for what is not given, expecting 201; e-mails named become people of the workspace first (`ensureMembers`). */
export async function createTeam(t: Requester, fields: Record<string, unknown> = {}, as?: string): Promise<Team> {
  await ensureMembers(t, (fields.members as string[] | undefined) ?? ['ada@example.com'], as);
  const res = await t.request({ method: 'POST', url: '/business/teams', body: { name: 'Support', members: ['ada@example.com'], ...fields }, ...(as ? { as } : {}) });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as Team;
}

/** POST /business/ab-tests (a draft) expecting 201; `personaA`/`personaB` are required fields. */
export async function createAbTest(t: Requester, fields: Record<string, unknown>, as?: string): Promise<AbTest> {
  const res = await t.request({ method: 'POST', url: '/business/ab-tests', body: { name: 'Test', ...fields }, ...(as ? { as } : {}) });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as AbTest;
}

/**
 * An interaction row written straight into the database (numbers only, as analytics reads them),
 * for times the API cannot produce: exact bucket edges, old answers, failures. Defaults: a
 * successful 100 ms answer in no session.
 */
export async function recordInteraction(
  t: TestApp,
  fields: Partial<Insertable<InteractionsTable>> & Pick<Insertable<InteractionsTable>, 'workspace_id' | 'persona_id' | 'started_at'>,
): Promise<void> {
  await t.ctx.db.kysely
    .insertInto('interactions')
    .values({ model: 'offline', latency_ms: 100, prompt_tokens: 0, completion_tokens: 0, tool_calls: 0, new_session: 0, ...fields })
    .execute();
}

/** A feedback rating written straight into the database at an exact time. */
export async function recordFeedback(
  t: TestApp,
  fields: Partial<Insertable<FeedbackTable>> & Pick<Insertable<FeedbackTable>, 'workspace_id' | 'persona_id' | 'rating' | 'created_at'>,
): Promise<void> {
  await t.ctx.db.kysely.insertInto('feedback').values(fields).execute();
}

/** The workspace id of a key (default the admin key's). */
export async function workspaceOf(t: TestApp, key = t.adminKey): Promise<string> {
  const actor = await t.ctx.services.auth.authenticate(key);
  if (!actor) throw new Error('unknown key');
  return actor.workspaceId;
}

/** POST /business/channels (admin key) expecting 201; `type`, `credentials` and a persona or A/B test come from `fields`. */
export async function createChannel(t: Requester, fields: Record<string, unknown>, as?: string): Promise<Channel> {
  const res = await t.request({ method: 'POST', url: '/business/channels', body: { name: 'Channel', ...fields }, ...(as ? { as } : {}) });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as Channel;
}

/** The password `invitePerson` gives a new person. */
export const PERSON_PASSWORD = 'correct horse battery';

/**
 * A person with `role`: POST /members/invitations (the admin key, or `as`), then the invitation
 * accepted; their id, session cookie header and CSRF token.
 */
export async function invitePerson(
  t: Requester,
  { email, role, name = email.split('@')[0], password = PERSON_PASSWORD }: { email: string; role: string; name?: string; password?: string },
  as?: string,
): Promise<{ userId: string; cookie: string; csrfToken: string }> {
  const invited = await t.request({ method: 'POST', url: '/members/invitations', body: { email, role }, ...(as ? { as } : {}) });
  expect(invited.statusCode, invited.body).toBe(201);
  const token = new URL((invited.json() as { url: string }).url).hash.slice(1);
  const res = await t.request({ method: 'POST', url: '/auth/invitations/accept', as: null, body: { token, name, password } });
  expect(res.statusCode, res.body).toBe(201);
  const cookie = /^(sb_session=[^;]+)/.exec(String(res.headers['set-cookie']))?.[1];
  if (!cookie) throw new Error('no session cookie');
  const body = res.json() as { user: { id: string }; csrfToken: string };
  return { userId: body.user.id, cookie, csrfToken: body.csrfToken };
}
