// API.md §7, issue 23 item 9: changing a tool server's credentials while calls run. Calls already
// running finish on the old connection (which then closes), calls arriving during the swap wait for
// the new one, concurrent changes settle to the last one written, and only DELETE fails calls in
// flight. Real HTTP routes, the real MCP SDK on both sides, over stdio and Streamable HTTP.
import type { LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_HUB_LIMITS } from '../../src/core/tools/mcp-clients.js';
import { createToolHub } from '../../src/core/tools/tool-hub.js';
import { createToolsStore } from '../../src/core/tools/tools.store.js';
import { createVault } from '../../src/core/tools/vault.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { execute, fakeServerPids, holdFolder, LOOPBACK_ONLY, registerServer, stdioServer, toolText, waitFor } from '../helpers/mcp-tools.js';
import { expectProblem } from '../helpers/problem.js';
import { type HttpTestServer, sha256, startHttpTestServer } from '../fakes/mcp-test-server.mjs';

/** Calls in flight per connection: each connection ends up holding exactly this many `hold` calls. */
const CAP = 4;
/** `hold` calls fired at once: CAP on the first connection, the rest queued behind them. */
const HELD = 16;
/** Credential changes one after another, each while every connection before it holds CAP calls. */
const SEQUENTIAL = HELD / CAP - 1;
/** Then this many changes at once, with DURING calls arriving among them. */
const CONCURRENT = 4;
const DURING = 8;
const LIMITS = { maxConcurrent: CAP, maxQueued: HELD, callTimeoutMs: 20_000 };
const WAIT_MS = 15_000;

const token = (i: number) => `rotating-token-${i}-value`;

interface Identity {
  pid: number;
  API_TOKEN: string | null;
}

/** Executes calls and keeps every answer, so a wait can stop at the first call that did not succeed. */
function callLog(t: TestApp) {
  const answered: LightMyRequestResponse[] = [];
  return {
    call: (body: Record<string, unknown>) =>
      execute(t, body).then((res) => {
        answered.push(res);
        return res;
      }),
    /** Throws (ending a waitFor) when a call answered anything but 200 succeeded. */
    assertNoFailure() {
      const bad = answered.find((r) => r.statusCode !== 200 || r.json().status !== 'succeeded');
      if (bad) throw new Error(`a call failed during the credential changes: ${bad.statusCode} ${bad.body}`);
      return true;
    },
  };
}

const putCredentials = (t: TestApp, id: string, credentials: Record<string, string>) =>
  t.request({ method: 'PUT', url: `/api/mcp/servers/${id}/credentials`, body: { credentials } });

/**
 * HELD `hold` calls, SEQUENTIAL credential changes while they are held, then CONCURRENT changes at
 * once with DURING `whoami` calls among them; then releases the calls. Asserts every call succeeded
 * on the connection it started on and the server now sees the last credential written. Returns the
 * identities the calls and a final `whoami` reported.
 */
async function changeCredentialsUnderLoad(t: TestApp, id: string): Promise<{ held: Identity[]; final: Identity }> {
  const hold = holdFolder();
  const log = callLog(t);
  try {
    const held = Array.from({ length: HELD }, () => log.call({ toolName: 'fake', action: 'hold', parameters: { dir: hold.dir } }));
    await waitFor(() => log.assertNoFailure() && hold.started().length >= CAP, WAIT_MS, 'the first calls to run');
    for (let i = 1; i <= SEQUENTIAL; i++) {
      const res = await putCredentials(t, id, { API_TOKEN: token(i) });
      expect(res.statusCode, res.body).toBe(200);
      // The calls queued behind the held ones move to the new connection and run there.
      await waitFor(() => log.assertNoFailure() && hold.started().length >= CAP * (i + 1), WAIT_MS, `calls on connection ${i}`);
    }
    const rounds = Array.from({ length: CONCURRENT }, (_, k) => SEQUENTIAL + 1 + k);
    const puts = rounds.map((i) => putCredentials(t, id, { API_TOKEN: token(i), [`ROUND_${i}`]: 'marks this change' }));
    const during = Array.from({ length: DURING }, () => log.call({ toolName: 'fake', action: 'whoami', parameters: {} }));
    for (const res of await Promise.all(puts)) expect(res.statusCode, res.body).toBe(200);
    hold.release();
    const answers = await Promise.all([...held, ...during]);
    for (const res of answers) {
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().status, res.body).toBe('succeeded');
    }
    const identities = answers.map((res) => JSON.parse(toolText(res.json())) as Identity);
    const heldIdentities = identities.slice(0, HELD);
    // Each held call finished on the connection it started on: CAP calls per credential, the first
    // CAP with the credential of before the first change.
    const perToken = new Map<string | null, number>();
    for (const who of heldIdentities) perToken.set(who.API_TOKEN, (perToken.get(who.API_TOKEN) ?? 0) + 1);
    expect(Object.fromEntries(perToken)).toEqual(Object.fromEntries(Array.from({ length: SEQUENTIAL + 1 }, (_, i) => [sha256(token(i)), CAP])));
    const known = new Set(Array.from({ length: SEQUENTIAL + CONCURRENT + 1 }, (_, i) => sha256(token(i))));
    for (const who of identities.slice(HELD)) expect(known.has(who.API_TOKEN ?? '')).toBe(true);

    // The change written last is the one the server lists (its ROUND_ name) and the one the tool server sees now.
    const server = (await t.request({ method: 'GET', url: `/api/mcp/servers/${id}` })).json() as { status: string; credentialNames: string[] };
    const round = server.credentialNames.filter((n) => n.startsWith('ROUND_'));
    expect(round).toHaveLength(1);
    const last = Number(round[0]!.slice('ROUND_'.length));
    const final = await waitFor(
      async () => {
        const res = await execute(t, { toolName: 'fake', action: 'whoami', parameters: {} });
        expect(res.statusCode, res.body).toBe(200);
        return JSON.parse(toolText(res.json())) as Identity;
      },
      WAIT_MS,
      'a whoami after the changes',
    );
    expect(final.API_TOKEN).toBe(sha256(token(last)));
    expect((await t.request({ method: 'GET', url: `/api/mcp/servers/${id}` })).json()).toMatchObject({ status: 'connected' });
    return { held: heldIdentities, final };
  } finally {
    hold.release();
    hold.remove();
  }
}

describe.each(testBackends())('credential changes under load, stdio on $kind', { timeout: 60_000 }, (backend) => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('every call succeeds, the newest credential wins, and every replaced child ends', async () => {
    t = await createTestApp({ backend, env: { SWITCHBOARD_MCP_STDIO: '1' }, overrides: { toolHub: LIMITS } });
    const { id } = await registerServer(t, stdioServer('fake', { API_TOKEN: token(0) }));
    const { held, final } = await changeCredentialsUnderLoad(t, id);
    // One child per connection that held calls, each with its own credential; only the newest runs on.
    expect(new Set(held.map((who) => who.pid)).size).toBe(SEQUENTIAL + 1);
    await waitFor(() => fakeServerPids().join() === String(final.pid), WAIT_MS, 'only the newest child to run');
  });

  it('DELETE fails the calls in flight on the old and new connections as removed, and ends every child', async () => {
    t = await createTestApp({ backend, env: { SWITCHBOARD_MCP_STDIO: '1' }, overrides: { toolHub: LIMITS } });
    const { id } = await registerServer(t, stdioServer('fake', { API_TOKEN: token(0) }));
    const hold = holdFolder();
    try {
      const onOld = execute(t, { toolName: 'fake', action: 'hold', parameters: { dir: hold.dir } });
      await waitFor(() => hold.started().length === 1, WAIT_MS, 'the call on the first connection');
      expect((await putCredentials(t, id, { API_TOKEN: token(1) })).statusCode).toBe(200);
      const onNew = execute(t, { toolName: 'fake', action: 'hold', parameters: { dir: hold.dir } });
      await waitFor(() => hold.started().length === 2, WAIT_MS, 'the call on the new connection');
      expect(hold.pids()).toHaveLength(2);

      expect((await t.request({ method: 'DELETE', url: `/api/mcp/servers/${id}` })).statusCode).toBe(204);
      for (const res of [await onOld, await onNew]) {
        expect(expectProblem(res, 502, 'upstream_error').detail).toMatch(/^fake was removed\. Recorded as execution exe_/);
      }
      await waitFor(() => fakeServerPids().length === 0, WAIT_MS, 'every child to end');
      const executions = (await t.request({ method: 'GET', url: '/api/mcp/executions?toolName=fake' })).json().data as Array<{ action: string; status: string }>;
      expect(executions.filter((e) => e.action === 'hold').map((e) => e.status)).toEqual(['failed', 'failed']);
      expectProblem(await execute(t, { toolName: 'fake', action: 'whoami', parameters: {} }), 404, 'not_found');
    } finally {
      hold.release();
      hold.remove();
    }
  });
});

describe.each(testBackends())('credential changes under load, Streamable HTTP on $kind', { timeout: 60_000 }, (backend) => {
  let t: TestApp;
  let fake: HttpTestServer;
  beforeAll(async () => {
    fake = await startHttpTestServer();
    t = await createTestApp({ backend, overrides: { fetch: LOOPBACK_ONLY, toolHub: LIMITS } });
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  it('every call succeeds and the newest credential header wins', async () => {
    const { id } = await registerServer(t, { name: 'fake', transport: 'http', url: fake.url, credentials: { API_TOKEN: token(0) } });
    await changeCredentialsUnderLoad(t, id);
  });
});

describe.each(testBackends())('the registry follows the store, not the row a request read on $kind', { timeout: 60_000 }, (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ backend, env: { SWITCHBOARD_MCP_STDIO: '1' } });
  });
  afterAll(async () => {
    await t?.close();
  });

  /**
   * A second hub over the app's database, as another request path (or instance) sees it. Its store
   * is the real one, except that one `findServerByName` can be held after it read (a slow database).
   */
  function hubWithSlowRead() {
    const store = createToolsStore(t.ctx.db.kysely);
    let next: { read: () => void; until: Promise<void> } | undefined;
    const hub = createToolHub({
      knowledge: t.ctx.services.knowledge,
      store: {
        ...store,
        async findServerByName(workspaceId: string, name: string) {
          const row = await store.findServerByName(workspaceId, name);
          const slow = next;
          next = undefined;
          if (slow) {
            slow.read();
            await slow.until;
          }
          return row;
        },
      },
      vault: createVault(t.ctx.cipher),
      logger: pino({ level: 'silent' }),
      guard: { allowPrivate: false },
      limits: DEFAULT_HUB_LIMITS,
      allowStdio: true,
    });
    /** Holds the next name lookup once it has read; resolves `read` then, and answers on `release()`. */
    const holdNextRead = () => {
      let release!: () => void;
      let read!: Promise<void>;
      const until = new Promise<void>((r) => (release = r));
      read = new Promise<void>((r) => (next = { read: r, until }));
      return { read, release };
    };
    return { hub, store, holdNextRead };
  }

  const whoamiOf = (output: { result: unknown }) => JSON.parse(toolText(output)) as Identity;

  it('a call that read the row before a change does not bring the old credential back', async () => {
    const { id } = await registerServer(t, stdioServer('stale', { API_TOKEN: token(0) }));
    const workspaceId = (await t.ctx.db.kysely.selectFrom('mcp_servers').select('workspace_id').where('id', '=', id).executeTakeFirstOrThrow()).workspace_id;
    const { hub, store, holdNextRead } = hubWithSlowRead();
    try {
      expect(whoamiOf(await hub.call(workspaceId, 'stale', 'whoami', {})).API_TOKEN).toBe(sha256(token(0)));
      const held = holdNextRead();
      const late = hub.call(workspaceId, 'stale', 'whoami', {});
      await held.read; // it holds the row of token 0
      expect((await putCredentials(t, id, { API_TOKEN: token(1) })).statusCode).toBe(200);
      expect((await hub.restart((await store.findServer(workspaceId, id))!)).status).toBe('connected');
      held.release();
      expect(whoamiOf(await late).API_TOKEN).toBe(sha256(token(1)));
      expect(whoamiOf(await hub.call(workspaceId, 'stale', 'whoami', {})).API_TOKEN).toBe(sha256(token(1)));
    } finally {
      await hub.close();
    }
  });

  it('restarts arriving out of order settle to the change written last', async () => {
    const { id } = await registerServer(t, stdioServer('ordered', { API_TOKEN: token(0) }));
    const workspaceId = (await t.ctx.db.kysely.selectFrom('mcp_servers').select('workspace_id').where('id', '=', id).executeTakeFirstOrThrow()).workspace_id;
    const { hub, store } = hubWithSlowRead();
    try {
      expect((await putCredentials(t, id, { API_TOKEN: token(1) })).statusCode).toBe(200);
      const first = (await store.findServer(workspaceId, id))!;
      expect((await putCredentials(t, id, { API_TOKEN: token(2) })).statusCode).toBe(200);
      const second = (await store.findServer(workspaceId, id))!;
      // The second change's restart overtakes the first's (two requests, a slow database).
      await hub.restart(second);
      const before = whoamiOf(await hub.call(workspaceId, 'ordered', 'whoami', {}));
      expect(before.API_TOKEN).toBe(sha256(token(2)));
      await hub.restart(first);
      // Still the same connection: none was built for the older row (nor left running with token 1).
      expect(whoamiOf(await hub.call(workspaceId, 'ordered', 'whoami', {}))).toEqual(before);
    } finally {
      await hub.close();
    }
  });
});
