import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Team } from '../../src/business/teams/teams.schemas.js';
import { manualClock } from '../../src/lib/clock.js';
import { sequentialIds } from '../../src/lib/ids.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { createTeam, ensureMembers } from '../helpers/factories.js';
import { callError, callOk, connectInMemory } from '../helpers/mcp.js';
import { expectProblem } from '../helpers/problem.js';

describe.each(testBackends())('teams (API.md §8) on $kind', (backend) => {
  let t: TestApp;
  // Mutable: one app checks several instants. 2026-03-09 is a Monday.
  const clock = manualClock(new Date('2026-03-09T12:00:00.000Z'));
  beforeAll(async () => {
    t = await createTestApp({ backend, overrides: { clock, ids: sequentialIds() } });
  });
  afterAll(async () => t.close());

  const get = async (id: string): Promise<Team> => {
    const res = await t.request({ method: 'GET', url: `/business/teams/${id}` });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Team;
  };
  const putAvailability = (id: string, body: unknown) => t.request({ method: 'PUT', url: `/business/teams/${id}/availability`, body });
  const availableAt = async (id: string, iso: string) => {
    clock.set(new Date(iso));
    return (await get(id)).availableNow;
  };

  it('creates with defaults, answers 201 with Location, and reads it back by id and in the list', async () => {
    clock.set(new Date('2026-03-09T12:00:00.000Z'));
    // Members are people of the workspace (API.md §14), named in any case and shown by their own e-mail.
    await ensureMembers(t, ['Ann@Example.com', 'bob@example.com']);
    const res = await t.request({ method: 'POST', url: '/business/teams', body: { name: ' Support ', members: ['ANN@example.com', 'bob@example.com'] } });
    expect(res.statusCode, res.body).toBe(201);
    const team = res.json() as Team;
    expect(team).toEqual({
      id: team.id,
      name: 'Support',
      members: [
        { email: 'Ann@Example.com', role: 'member', status: 'available', chatUserId: null },
        { email: 'bob@example.com', role: 'member', status: 'available', chatUserId: null },
      ],
      availability: { status: 'available', timezone: 'UTC', weekly: [] },
      availableNow: true,
      handoff: { offerSeconds: 120, notifyUrl: null, desk: null },
      createdAt: '2026-03-09T12:00:00.000Z',
      updatedAt: '2026-03-09T12:00:00.000Z',
    });
    expect(team.id).toMatch(/^team_/);
    expect(res.headers.location).toBe(`/business/teams/${team.id}`);
    expect(await get(team.id)).toEqual(team);
    expect((await t.request({ method: 'GET', url: `/api/business/teams/${team.id}` })).json()).toEqual(team);
  });

  it('lists newest first with limit and cursor', async () => {
    const first = await createTeam(t, { name: 'First' });
    clock.advance(1000);
    const second = await createTeam(t, { name: 'Second', members: [] });
    const page = (await t.request({ method: 'GET', url: '/business/teams?limit=1' })).json();
    expect(page.data.map((x: Team) => x.id)).toEqual([second.id]);
    expect(page.data[0]).toEqual({ ...second, availableNow: false }); // no members
    const next = (await t.request({ method: 'GET', url: `/business/teams?limit=1&cursor=${page.nextCursor}` })).json();
    expect(next.data.map((x: Team) => x.id)).toEqual([first.id]);
    expect(next.data[0].members).toEqual(first.members);
    expectProblem(await t.request({ method: 'GET', url: '/business/teams?limit=101' }), 400, 'validation_failed', 'limit');
    expectProblem(await t.request({ method: 'GET', url: '/business/teams?sort=name' }), 400, 'validation_failed', 'sort');
  });

  it('replays a create with the same Idempotency-Key and creates nothing new', async () => {
    const headers = { 'idempotency-key': 'team-create-1' };
    const body = { name: 'Replayed', members: ['x@example.com'] };
    await ensureMembers(t, body.members);
    const one = await t.request({ method: 'POST', url: '/business/teams', body, headers });
    const two = await t.request({ method: 'POST', url: '/business/teams', body, headers });
    expect(one.statusCode).toBe(201);
    expect(two.statusCode).toBe(201);
    expect(two.json()).toEqual(one.json());
    const all = (await t.request({ method: 'GET', url: '/business/teams?limit=100' })).json().data as Team[];
    expect(all.filter((x) => x.name === 'Replayed')).toHaveLength(1);
    expectProblem(await t.request({ method: 'POST', url: '/business/teams', body: { ...body, name: 'Other' }, headers }), 409, 'conflict');
  });

  it('validates the create body and names the field', async () => {
    await ensureMembers(t, ['ok@example.com']);
    const cases: [unknown, string][] = [
      [{ members: [] }, 'name'],
      [{ name: '', members: [] }, 'name'],
      [{ name: 'n' }, 'members'],
      [{ name: 'n', members: ['ok@example.com', 'not-an-email'] }, 'members.1'],
      [{ name: 'n', members: ['a@example.com', 'b@example.com', 'A@EXAMPLE.com'] }, 'members.2'],
      [{ name: 'n', members: Array.from({ length: 201 }, (_, i) => `u${i}@example.com`) }, 'members'],
      [{ name: 'n', members: [], id: 'team_mine' }, 'id'],
      [{ name: 'n', members: [], status: 'busy' }, 'status'],
    ];
    for (const [body, path] of cases) {
      expectProblem(await t.request({ method: 'POST', url: '/business/teams', body }), 400, 'validation_failed', path);
    }
  });

  it('adds a member (201) and refuses one already there, also in another case (409)', async () => {
    const team = await createTeam(t, { members: ['ada@example.com'] });
    await ensureMembers(t, ['lead@example.com', 'cy@example.com', 'race@example.com']);
    clock.advance(1000);
    const res = await t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: { email: 'lead@example.com', role: 'lead' } });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.headers.location).toBe(`/business/teams/${team.id}`);
    expect(res.json().members).toEqual([
      { email: 'ada@example.com', role: 'member', status: 'available', chatUserId: null },
      { email: 'lead@example.com', role: 'lead', status: 'available', chatUserId: null },
    ]);
    expect(res.json().updatedAt).toBe(clock.now().toISOString());
    const plain = await t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: { email: 'cy@example.com' } });
    expect(plain.json().members[2]).toEqual({ email: 'cy@example.com', role: 'member', status: 'available', chatUserId: null });

    for (const email of ['ada@example.com', 'ADA@example.COM', 'Lead@Example.com']) {
      expectProblem(await t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: { email } }), 409, 'conflict');
    }
    expectProblem(await t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: { email: 'nope' } }), 400, 'validation_failed', 'email');
    expectProblem(await t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: { email: 'd@example.com', role: 'boss' } }), 400, 'validation_failed', 'role');
    expectProblem(await t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: { email: 'd@example.com', status: 'busy' } }), 400, 'validation_failed', 'status');
    expectProblem(await t.request({ method: 'POST', url: '/business/teams/team_missing/members', body: { email: 'd@example.com' } }), 404, 'not_found');
    expect((await get(team.id)).members).toHaveLength(3);

    // Two adds of one e-mail at once: the UNIQUE constraint lets exactly one in.
    const race = await Promise.all(
      ['race@example.com', 'RACE@example.com'].map((email) => t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: { email } })),
    );
    expect(race.map((r) => r.statusCode).sort()).toEqual([201, 409]);
    expect((await get(team.id)).members).toHaveLength(4);
  });

  it('updates availability and member statuses; refuses a non-member, a bad zone and bad windows', async () => {
    const team = await createTeam(t, { members: ['ada@example.com', 'bob@example.com'] });
    clock.advance(1000);
    const weekly = [{ day: 'mon', start: '09:00', end: '17:00' }, { day: 'fri', start: '22:00', end: '24:00' }];
    const res = await putAvailability(team.id, { status: 'busy', timezone: 'europe/berlin', weekly, members: [{ email: 'BOB@example.com', status: 'offline' }] });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      availability: { status: 'busy', timezone: 'Europe/Berlin', weekly },
      members: [
        { email: 'ada@example.com', status: 'available' },
        { email: 'bob@example.com', status: 'offline' },
      ],
      availableNow: false,
      updatedAt: clock.now().toISOString(),
      createdAt: team.createdAt,
    });
    expect(await get(team.id)).toEqual(res.json());
    // A subset leaves the rest alone.
    const partial = (await putAvailability(team.id, { status: 'available' })).json();
    expect(partial.availability).toEqual({ status: 'available', timezone: 'Europe/Berlin', weekly });

    const cases: [unknown, string][] = [
      [{ members: [{ email: 'ada@example.com', status: 'busy' }, { email: 'zed@example.com', status: 'busy' }] }, 'members.1.email'],
      [{ members: [{ email: 'ada@example.com', status: 'away' }] }, 'members.0.status'],
      [{ members: [{ email: 'ada@example.com', status: 'busy' }, { email: 'ADA@example.com', status: 'offline' }] }, 'members.1.email'],
      [{ members: [{ email: 'ada@example.com', status: 'busy', role: 'lead' }] }, 'members.0.role'],
      [{ timezone: 'Mars/Olympus' }, 'timezone'],
      [{ timezone: '+05:30' }, 'timezone'],
      [{ status: 'away' }, 'status'],
      [{ weekly: [{ day: 'mon', start: '9:00', end: '17:00' }] }, 'weekly.0.start'],
      [{ weekly: [{ day: 'mon', start: '24:00', end: '24:00' }] }, 'weekly.0.start'],
      [{ weekly: [{ day: 'mon', start: '09:00', end: '17:60' }] }, 'weekly.0.end'],
      [{ weekly: [{ day: 'mon', start: '09:00', end: '24:01' }] }, 'weekly.0.end'],
      [{ weekly: [{ day: 'mon', start: '22:00', end: '02:00' }] }, 'weekly.0.end'],
      [{ weekly: [{ day: 'mon', start: '09:00', end: '09:00' }] }, 'weekly.0.end'],
      [{ weekly: [{ day: 'monday', start: '09:00', end: '17:00' }] }, 'weekly.0.day'],
      [{ weekly: Array.from({ length: 51 }, () => ({ day: 'mon', start: '09:00', end: '17:00' })) }, 'weekly'],
      [{ name: 'rename' }, 'name'],
    ];
    for (const [body, path] of cases) expectProblem(await putAvailability(team.id, body), 400, 'validation_failed', path);
    // Nothing of a refused body was applied.
    expect(await get(team.id)).toEqual(partial);
    expectProblem(await putAvailability('team_missing', { status: 'busy' }), 404, 'not_found');
  });

  it('availableNow: status, members, and no schedule = always', async () => {
    const team = await createTeam(t, { members: ['ada@example.com', 'bob@example.com'] });
    expect(await availableAt(team.id, '2026-03-10T03:00:00Z')).toBe(true); // no weekly: any time
    await putAvailability(team.id, { status: 'busy' });
    expect(await availableAt(team.id, '2026-03-10T03:00:00Z')).toBe(false);
    await putAvailability(team.id, { status: 'offline' });
    expect(await availableAt(team.id, '2026-03-10T03:00:00Z')).toBe(false);
    await putAvailability(team.id, { status: 'available', members: [{ email: 'ada@example.com', status: 'busy' }, { email: 'bob@example.com', status: 'offline' }] });
    expect(await availableAt(team.id, '2026-03-10T03:00:00Z')).toBe(false);
    await putAvailability(team.id, { members: [{ email: 'Bob@Example.com', status: 'available' }] });
    expect(await availableAt(team.id, '2026-03-10T03:00:00Z')).toBe(true);
  });

  // A Sunday 09:00–17:00 window checked one minute either side of both edges, in local time, on DST-change days.
  const dstEdges: [string, string, [string, boolean][]][] = [
    ['America/New_York', 'spring forward 2026-03-08', [['2026-03-08T12:59:00Z', false], ['2026-03-08T13:00:00Z', true], ['2026-03-08T20:59:00Z', true], ['2026-03-08T21:00:00Z', false]]],
    ['America/New_York', 'fall back 2026-11-01', [['2026-11-01T13:59:00Z', false], ['2026-11-01T14:00:00Z', true], ['2026-11-01T21:59:00Z', true], ['2026-11-01T22:00:00Z', false]]],
    ['Europe/Berlin', 'summer time 2026-03-29', [['2026-03-29T06:59:00Z', false], ['2026-03-29T07:00:00Z', true], ['2026-03-29T14:59:00Z', true], ['2026-03-29T15:00:00Z', false]]],
    ['Europe/Berlin', 'winter time 2026-10-25', [['2026-10-25T07:59:00Z', false], ['2026-10-25T08:00:00Z', true], ['2026-10-25T15:59:00Z', true], ['2026-10-25T16:00:00Z', false]]],
  ];
  for (const [zone, label, instants] of dstEdges) {
    it(`availableNow in ${zone}, ${label}: 09:00–17:00 local`, async () => {
      const team = await createTeam(t);
      await putAvailability(team.id, { timezone: zone, weekly: [{ day: 'sun', start: '09:00', end: '17:00' }] });
      for (const [iso, expected] of instants) expect(await availableAt(team.id, iso), iso).toBe(expected);
      // The list computes it at the same instant as the single read.
      clock.set(new Date(instants[1]![0]));
      const list = (await t.request({ method: 'GET', url: '/business/teams?limit=100' })).json().data as Team[];
      expect(list.find((x) => x.id === team.id)?.availableNow).toBe(true);
    });
  }

  it('availableNow at non-hour offsets: Asia/Kolkata (+05:30) and Australia/Lord_Howe (30-minute DST)', async () => {
    const kolkata = await createTeam(t);
    await putAvailability(kolkata.id, { timezone: 'Asia/Kolkata', weekly: [{ day: 'mon', start: '09:00', end: '17:00' }] });
    expect((await get(kolkata.id)).availability.timezone).toBe('Asia/Kolkata');
    expect(await availableAt(kolkata.id, '2026-03-09T03:29:00Z')).toBe(false);
    expect(await availableAt(kolkata.id, '2026-03-09T03:30:00Z')).toBe(true);
    expect(await availableAt(kolkata.id, '2026-03-09T11:29:00Z')).toBe(true);
    expect(await availableAt(kolkata.id, '2026-03-09T11:30:00Z')).toBe(false);

    const lordHowe = await createTeam(t);
    await putAvailability(lordHowe.id, { timezone: 'Australia/Lord_Howe', weekly: [{ day: 'mon', start: '09:00', end: '17:00' }] });
    expect(await availableAt(lordHowe.id, '2026-01-04T21:59:00Z')).toBe(false); // +11:00
    expect(await availableAt(lordHowe.id, '2026-01-04T22:00:00Z')).toBe(true);
    expect(await availableAt(lordHowe.id, '2026-07-05T22:29:00Z')).toBe(false); // +10:30
    expect(await availableAt(lordHowe.id, '2026-07-05T22:30:00Z')).toBe(true);
  });

  it('a window ending 24:00 runs to local midnight', async () => {
    const team = await createTeam(t);
    await putAvailability(team.id, { timezone: 'UTC', weekly: [{ day: 'sun', start: '22:00', end: '24:00' }, { day: 'mon', start: '00:00', end: '02:00' }] });
    expect(await availableAt(team.id, '2026-03-08T21:59:00Z')).toBe(false);
    expect(await availableAt(team.id, '2026-03-08T23:59:00Z')).toBe(true);
    expect(await availableAt(team.id, '2026-03-09T00:00:00Z')).toBe(true); // the Monday window continues it
    expect(await availableAt(team.id, '2026-03-09T02:00:00Z')).toBe(false);
  });

  it('a read key can list and get but not write (403)', async () => {
    const team = await createTeam(t);
    const reader = (await t.request({ method: 'POST', url: '/auth/api-keys', body: { name: 'reader', scopes: ['read'] } })).json().key as string;
    expect((await t.request({ method: 'GET', url: `/business/teams/${team.id}`, as: reader })).statusCode).toBe(200);
    expect((await t.request({ method: 'GET', url: '/business/teams', as: reader })).statusCode).toBe(200);
    expectProblem(await t.request({ method: 'POST', url: '/business/teams', body: { name: 'x', members: [] }, as: reader }), 403, 'forbidden');
    expectProblem(await t.request({ method: 'PUT', url: `/business/teams/${team.id}/availability`, body: { status: 'busy' }, as: reader }), 403, 'forbidden');
    expectProblem(await t.request({ method: 'POST', url: `/business/teams/${team.id}/members`, body: { email: 'r@example.com' }, as: reader }), 403, 'forbidden');
    const after = await get(team.id);
    expect([after.members, after.availability, after.updatedAt]).toEqual([team.members, team.availability, team.updatedAt]);
    expectProblem(await t.request({ method: 'GET', url: '/business/teams', as: null }), 401, 'unauthorized');
  });

  it('never shows one workspace’s teams to another (404 on every route, empty list)', async () => {
    const mine = await createTeam(t);
    const other = (await t.ctx.services.auth.createWorkspace('other')).key.key;
    expectProblem(await t.request({ method: 'GET', url: `/business/teams/${mine.id}`, as: other }), 404, 'not_found');
    expectProblem(await t.request({ method: 'PUT', url: `/business/teams/${mine.id}/availability`, body: { status: 'busy' }, as: other }), 404, 'not_found');
    expectProblem(await t.request({ method: 'POST', url: `/business/teams/${mine.id}/members`, body: { email: 'spy@example.com' }, as: other }), 404, 'not_found');
    expect((await t.request({ method: 'GET', url: '/business/teams', as: other })).json()).toEqual({ data: [], nextCursor: null });
    const after = await get(mine.id);
    expect(after.members).toEqual(mine.members);
    expect(after.availability).toEqual(mine.availability);

    // Their own team is theirs alone, even with the same member e-mail.
    const theirs = await createTeam(t, { name: 'Theirs' }, other);
    expect((await t.request({ method: 'GET', url: '/business/teams', as: other })).json().data.map((x: Team) => x.id)).toEqual([theirs.id]);
    expectProblem(await t.request({ method: 'GET', url: `/business/teams/${theirs.id}` }), 404, 'not_found');

    const stranger = await connectInMemory(t, other);
    expect((await callOk(stranger, 'list_teams')).data.map((x: Team) => x.id)).toEqual([theirs.id]);
    await stranger.close();
  });

  it('list_teams over MCP returns the same page as GET /business/teams', async () => {
    clock.set(new Date('2026-03-09T12:00:00.000Z'));
    const client = await connectInMemory(t);
    const page = await callOk<{ data: Team[]; nextCursor: string | null }>(client, 'list_teams', { limit: 2 });
    const http = (await t.request({ method: 'GET', url: '/business/teams?limit=2' })).json();
    expect(page).toEqual(http);
    expect(page.data).toHaveLength(2);
    const next = await callOk(client, 'list_teams', { limit: 2, cursor: page.nextCursor });
    expect(next.data[0].id).not.toBe(page.data[0]!.id);
    expect(await callError(client, 'list_teams', { limit: 500 })).toContain('limit');
    const tools = (await client.listTools()).tools.find((x) => x.name === 'list_teams');
    expect(tools?.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    await client.close();
  });
});
