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

/** POST /business/teams with defaults for what is not given, expecting 201. */
export async function createTeam(t: Requester, fields: Record<string, unknown> = {}, as?: string): Promise<Team> {
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
