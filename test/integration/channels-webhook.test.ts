// API.md §9 through webhook channels: connecting, signed inbound messages answered synchronously
// (sessions per conversationId, A/B variants, analytics), settings applied live, signed outbound
// deliveries through the address guard, the channel tools, and the refusals.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signature } from '../../bridges/webhook/webhook-bridge.js';
import { startReceiver, type WebhookReceiver } from '../fakes/webhook-receiver.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testBackends } from '../helpers/postgres.js';
import { createAbTest, createChannel, createPersona } from '../helpers/factories.js';
import { callOk, connectInMemory } from '../helpers/mcp.js';
import { LOOPBACK_ONLY } from '../helpers/mcp-tools.js';
import { expectProblem } from '../helpers/problem.js';
import { expectSealed } from '../helpers/sealed.js';

const SECRET = 'webhook-secret-0123456789abcdef';

describe.each(testBackends())('webhook channels on $kind', { timeout: 20_000 }, (backend) => {
  let t: TestApp;
  let persona: string;
  let receiver: WebhookReceiver;

  /** POST /business/channels/:id/inbound, signed with `secret` unless `sign` says otherwise. */
  const inbound = (channelId: string, body: unknown, sign: string | null = SECRET, headers: Record<string, string> = {}) => {
    const raw = typeof body === 'string' ? body : JSON.stringify(body);
    return t.app.inject({
      method: 'POST',
      url: `/business/channels/${channelId}/inbound`,
      headers: { 'content-type': 'application/json', ...(sign === null ? {} : { 'x-switchboard-signature': signature(sign, raw) }), ...headers },
      payload: raw,
    });
  };

  beforeAll(async () => {
    receiver = await startReceiver(1);
    t = await createTestApp({ backend, overrides: { fetch: LOOPBACK_ONLY } });
    persona = (await createPersona(t, { name: 'Helpdesk', instructions: 'Help.' })).id;
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  it('connects a channel: 201, defaults, never the credentials; admin only; bad bodies refused', async () => {
    const channel = await createChannel(t, { type: 'webhook', name: 'Site chat', personaId: persona, credentials: { secret: SECRET } });
    expect(channel).toMatchObject({ type: 'webhook', name: 'Site chat', personaId: persona, abTestId: null, status: 'connected', statusDetail: null });
    expect(channel.settings).toEqual({ respondTo: 'mentions', replyInThread: true, allowedConversations: [], enabled: true, streaming: true, feedbackButtons: true, statusMessages: [], suggestedPrompts: [] });
    const listed = await t.request({ method: 'GET', url: '/business/channels?type=webhook' });
    expect(listed.json().data.map((c: { id: string }) => c.id)).toContain(channel.id);
    for (const res of [listed, await t.request({ method: 'GET', url: `/business/channels/${channel.id}` })]) expect(res.body).not.toContain(SECRET);
    const stored = Object.values((await t.ctx.db.prepare<Record<string, unknown>>('SELECT secrets FROM channels WHERE id = ?').first(channel.id)) ?? {})[0] as string;
    expect(stored).not.toContain(SECRET);
    expect(JSON.parse(expectSealed(t, stored, `channel:${channel.id}`))).toEqual({ secret: SECRET });

    const post = (body: Record<string, unknown>, as?: string) => t.request({ method: 'POST', url: '/business/channels', body: { type: 'webhook', name: 'X', ...body }, ...(as ? { as } : {}) });
    expectProblem(await post({ credentials: { secret: SECRET } }), 400, 'validation_failed', 'personaId');
    expectProblem(await post({ personaId: persona, credentials: { secret: 'short' } }), 400, 'validation_failed', 'credentials.secret');
    expectProblem(await post({ personaId: persona, credentials: { secret: SECRET, outboundUrl: 'http://10.0.0.8/hook' } }), 400, 'validation_failed', 'credentials.outboundUrl');
    expectProblem(await post({ type: 'slack', personaId: persona, credentials: { botToken: 'xoxb-1' } }), 400, 'validation_failed');
    expectProblem(await post({ personaId: 'per_ghost', credentials: { secret: SECRET } }), 404, 'not_found');
    const { key } = await t.ctx.services.auth.createKeyInWorkspace('default', 'writer', ['read', 'write']);
    expectProblem(await post({ personaId: persona, credentials: { secret: SECRET } }, key.key), 403, 'forbidden');
  });

  it('answers signed messages synchronously, one session per conversationId, recorded with the channel', async () => {
    const channel = await createChannel(t, { type: 'webhook', personaId: persona, credentials: { secret: SECRET } });
    const first = await inbound(channel.id, { conversationId: 'conv-1', userId: 'visitor-1', message: 'Hello there' });
    expect(first.statusCode, first.body).toBe(200);
    const answer = first.json();
    expect(answer.reply).toMatch(/^Offline model/);
    const again = (await inbound(channel.id, { conversationId: 'conv-1', userId: 'visitor-1', message: 'Anything else?' })).json();
    expect(again.sessionId).toBe(answer.sessionId);
    const other = (await inbound(channel.id, { conversationId: 'conv-2', message: 'Hi' })).json();
    expect(other.sessionId).not.toBe(answer.sessionId);

    const session = (await t.request({ method: 'GET', url: `/sessions/${answer.sessionId}` })).json();
    expect(session).toMatchObject({ channelId: channel.id, userId: 'visitor-1', personaId: persona, messageCount: 4 });
    expect(session.messages.at(-1).id).toBe(again.messageId);
    const byChannel = (await t.request({ method: 'GET', url: `/sessions?channelId=${channel.id}` })).json().data;
    expect(byChannel.map((s: { id: string }) => s.id).sort()).toEqual([answer.sessionId, other.sessionId].sort());
    expectProblem(await t.request({ method: 'GET', url: '/sessions?channelId=chn_nope' }), 404, 'not_found');
    const analytics = (await t.request({ method: 'GET', url: `/business/analytics/conversations?timeframe=1h&channelId=${channel.id}` })).json();
    expect(analytics.total).toBe(2);
    expect(analytics.byChannel).toEqual([{ channelId: channel.id, count: 2 }]);
  });

  it('refuses what is not signed right, disabled, malformed or delivered twice', async () => {
    const channel = await createChannel(t, { type: 'webhook', personaId: persona, credentials: { secret: SECRET } });
    const body = { conversationId: 'c', message: 'hi' };
    expect(expectProblem(await inbound(channel.id, body, null), 401, 'unauthorized').detail).toContain('X-Switchboard-Signature');
    expectProblem(await inbound(channel.id, body, 'another-secret-0123456789'), 401, 'unauthorized');
    const tampered = JSON.stringify(body);
    expectProblem(
      await t.app.inject({ method: 'POST', url: `/business/channels/${channel.id}/inbound`, headers: { 'content-type': 'application/json', 'x-switchboard-signature': signature(SECRET, tampered) }, payload: tampered.replace('hi', 'ho') }),
      401,
      'unauthorized',
    );
    expectProblem(await inbound('chn_nope', body), 404, 'not_found');
    // A webhook channel has no Slack Events API endpoint.
    expectProblem(await t.app.inject({ method: 'POST', url: `/business/channels/${channel.id}/slack/events`, headers: { 'content-type': 'application/json' }, payload: '{}' }), 404, 'not_found');
    expectProblem(await inbound(channel.id, '{"conversationId":'), 400, 'invalid_json');
    expectProblem(await inbound(channel.id, { conversationId: 'c' }), 400, 'validation_failed', 'message');
    // A body that is no object is named as the body, as on every JSON route.
    for (const notAnObject of ['[]', 'null', '"text"']) expectProblem(await inbound(channel.id, notAnObject), 400, 'validation_failed', 'body');
    expect((await inbound(channel.id, body, SECRET, { 'x-switchboard-delivery': 'd-1' })).statusCode).toBe(200);
    expectProblem(await inbound(channel.id, body, SECRET, { 'x-switchboard-delivery': 'd-1' }), 409, 'conflict');

    const off = await t.request({ method: 'PUT', url: `/business/channels/${channel.id}/settings`, body: { enabled: false } });
    expect(off.json()).toMatchObject({ status: 'disabled', settings: { enabled: false } });
    expectProblem(await inbound(channel.id, body), 409, 'conflict');
    const on = await t.request({ method: 'PUT', url: `/business/channels/${channel.id}/settings`, body: { enabled: true } });
    expect(on.json().status).toBe('connected');
    expect((await inbound(channel.id, body)).statusCode).toBe(200);
  });

  it('applies a new persona live and keeps the persona from being deleted while a channel uses it', async () => {
    const other = (await createPersona(t, { name: 'Night shift' })).id;
    const channel = await createChannel(t, { type: 'webhook', personaId: persona, credentials: { secret: SECRET } });
    const first = await inbound(channel.id, { conversationId: 'live', message: 'hi' });
    expect(first.statusCode, first.body).toBe(200);
    const before = first.json();
    expect((await t.request({ method: 'GET', url: `/sessions/${before.sessionId}` })).json().personaId).toBe(persona);
    expect(expectProblem(await t.request({ method: 'DELETE', url: `/personas/${persona}` }), 409, 'conflict').detail).toContain('answers in channel');
    const moved = await t.request({ method: 'PUT', url: `/business/channels/${channel.id}/settings`, body: { personaId: other, respondTo: 'all' } });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json()).toMatchObject({ personaId: other, settings: { respondTo: 'all' } });
    const second = await inbound(channel.id, { conversationId: 'live', message: 'hi again' });
    expect(second.statusCode, second.body).toBe(200);
    const after = second.json();
    const session = (await t.request({ method: 'GET', url: `/sessions/${after.sessionId}` })).json();
    expect(session.personaId).toBe(other);
    expect(after.sessionId).toMatch(/^ses_/);
    expect(after.sessionId).not.toBe(before.sessionId);
    expectProblem(await t.request({ method: 'PUT', url: `/business/channels/${channel.id}/settings`, body: { respondTo: 'some' } }), 400, 'validation_failed', 'respondTo');
    expectProblem(await t.request({ method: 'PUT', url: `/business/channels/${channel.id}/settings`, body: { personaId: 'per_ghost' } }), 404, 'not_found');
  });

  it('routes through a running A/B test and records the variant', async () => {
    const b = (await createPersona(t, { name: 'Variant B' })).id;
    const test = await createAbTest(t, { personaA: persona, personaB: b });
    const channel = await createChannel(t, { type: 'webhook', abTestId: test.id, credentials: { secret: SECRET } });
    expectProblem(await inbound(channel.id, { conversationId: 'ab-1', userId: 'u1', message: 'hi' }), 409, 'conflict');
    await t.request({ method: 'PUT', url: `/business/ab-tests/${test.id}/start` });
    const answer = (await inbound(channel.id, { conversationId: 'ab-1', userId: 'u1', message: 'hi' })).json();
    const session = (await t.request({ method: 'GET', url: `/sessions/${answer.sessionId}` })).json();
    expect(session).toMatchObject({ abTestId: test.id, channelId: channel.id });
    expect(session.personaId).toBe(session.variant === 'A' ? persona : b);
    const results = (await t.request({ method: 'GET', url: `/business/ab-tests/${test.id}/results` })).json();
    expect(results.variants[session.variant].conversations).toBe(1);
    await t.request({ method: 'PUT', url: `/business/ab-tests/${test.id}/stop` });
  });

  it('delivers sends to outboundUrl, signed, retrying a 429; and through the webhook.send_message tool and MCP', async () => {
    const channel = await createChannel(t, { type: 'webhook', name: 'Outbound', personaId: persona, credentials: { secret: SECRET, outboundUrl: receiver.url } });
    const res = await t.request({ method: 'POST', url: `/business/channels/${channel.id}/send`, body: { to: 'conv-9', message: 'Your order shipped', priority: 'high' } });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json()).toMatchObject({ channelId: channel.id, status: 'sent' });
    expect(receiver.refused()).toBe(1); // the first attempt met a 429 and was retried
    const delivered = receiver.deliveries.at(-1)!;
    expect(delivered.signature).toBe(signature(SECRET, delivered.body));
    expect(JSON.parse(delivered.body)).toMatchObject({ channelId: channel.id, conversationId: 'conv-9', message: 'Your order shipped', priority: 'high', id: res.json().externalId });

    const tools = (await t.request({ method: 'GET', url: '/api/mcp/tools' })).json().data;
    expect(tools).toContainEqual(expect.objectContaining({ toolName: 'webhook', action: 'send_message' }));
    expect(tools.some((x: { toolName: string }) => x.toolName === 'slack')).toBe(false);
    const count = receiver.deliveries.length;
    const viaTool = await t.request({
      method: 'POST',
      url: '/api/mcp/tools/execute',
      body: { toolName: 'webhook', action: 'send_message', parameters: { channel: `${channel.name}/conv-10`, message: 'From a tool' } },
    });
    expect(viaTool.json(), viaTool.body).toMatchObject({ status: 'succeeded' });
    expect(receiver.deliveries.length).toBe(count + 1);
    expect(JSON.parse(receiver.deliveries.at(-1)!.body)).toMatchObject({ conversationId: 'conv-10', message: 'From a tool' });
    const ambiguous = await t.request({ method: 'POST', url: '/api/mcp/tools/execute', body: { toolName: 'webhook', action: 'send_message', parameters: { channel: 'conv-11', message: 'x' } } });
    expectProblem(ambiguous, 400, 'validation_failed', 'parameters.channel');

    const client = await connectInMemory(t);
    try {
      const listed = await callOk(client, 'list_channels', { type: 'webhook' });
      expect(listed.data.map((c: { id: string }) => c.id)).toContain(channel.id);
      const sent = await callOk(client, 'send_channel_message', { channelId: channel.id, to: 'conv-12', message: 'From MCP' });
      expect(sent).toMatchObject({ channelId: channel.id, status: 'sent' });
      expect(JSON.parse(receiver.deliveries.at(-1)!.body)).toMatchObject({ conversationId: 'conv-12', message: 'From MCP' });
    } finally {
      await client.close();
    }
    const noUrl = await createChannel(t, { type: 'webhook', personaId: persona, credentials: { secret: SECRET } });
    expectProblem(await t.request({ method: 'POST', url: `/business/channels/${noUrl.id}/send`, body: { to: 'x', message: 'y' } }), 409, 'conflict');
  });

  it('keeps every route to its workspace: a foreign settings change or send does nothing', async () => {
    const channel = await createChannel(t, { type: 'webhook', personaId: persona, credentials: { secret: SECRET, outboundUrl: receiver.url } });
    const other = await t.ctx.services.auth.createWorkspace('channels-other');
    const key = other.key.key;
    const delivered = receiver.deliveries.length;
    expectProblem(await t.request({ method: 'GET', url: `/business/channels/${channel.id}`, as: key }), 404, 'not_found');
    const foreignPersona = (await createPersona(t, { name: 'Intruder' }, key)).id;
    for (const body of [{ enabled: false }, { respondTo: 'all', allowedConversations: ['theirs'] }, { personaId: foreignPersona }]) {
      expectProblem(await t.request({ method: 'PUT', url: `/business/channels/${channel.id}/settings`, as: key, body }), 404, 'not_found');
    }
    // Re-read as the owner: unchanged, still enabled, still answering, nothing sent.
    expect((await t.request({ method: 'GET', url: `/business/channels/${channel.id}` })).json()).toEqual(channel);
    const answered = await inbound(channel.id, { conversationId: 'after-intruder', message: 'still there?' });
    expect(answered.statusCode, answered.body).toBe(200);
    expectProblem(await t.request({ method: 'POST', url: `/business/channels/${channel.id}/send`, as: key, body: { to: 'x', message: 'y' } }), 404, 'not_found');
    expect(receiver.deliveries.length).toBe(delivered);
    expect((await t.request({ method: 'GET', url: '/business/channels', as: key })).json().data).toEqual([]);
    expectProblem(await t.request({ method: 'POST', url: '/business/channels', as: key, body: { type: 'webhook', name: 'x', personaId: persona, credentials: { secret: SECRET } } }), 404, 'not_found');
    expectProblem(await t.request({ method: 'GET', url: `/sessions?channelId=${channel.id}`, as: key }), 404, 'not_found');
  });
});
