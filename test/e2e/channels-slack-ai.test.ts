// Issue 30 end to end with the real @slack/bolt and @slack/web-api: a Slack channel answers as an AI
// app — a status while the answer is worked out (`assistant.threads.setStatus`), the answer streamed
// natively (`chat.startStream` / `appendStream` / `stopStream`) and feedback buttons under it whose
// click (a signed `block_actions` form) rates the answer once per person, in analytics. Against a
// Slack that refuses streaming, the same channel posts then edits, and remembers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeSlack, startFakeSlack } from '../fakes/slack-api.js';
import { blockActions, eventCallback, messageEvent, nextTs, signSlackForm, signSlackRequest } from '../fakes/slack-events.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createChannel, createPersona, createTeam } from '../helpers/factories.js';
import { seedSupport } from '../integration/chat-helpers.js';

const BOT_TOKEN = 'xoxb-ai-app';
const APP_TOKEN = 'xapp-ai-app';
const SIGNING_SECRET = 'ai-app-signing-secret';

describe('Slack as an AI app', { timeout: 30_000 }, () => {
  let fake: FakeSlack;
  let t: TestApp;
  let channelId: string;

  const deliver = (body: Record<string, unknown>) => {
    const raw = JSON.stringify(body);
    return t.app.inject({ method: 'POST', url: `/business/channels/${channelId}/slack/events`, headers: signSlackRequest(raw, SIGNING_SECRET), payload: raw });
  };
  const click = (user: string, value: 'positive' | 'negative', messageTs: string, threadTs: string) => {
    const payload = blockActions({ user, actionId: 'switchboard.feedback', value, channel: 'C1', messageTs, threadTs });
    (payload.actions as Array<Record<string, unknown>>)[0]!.type = 'feedback_buttons';
    const form = signSlackForm(payload, SIGNING_SECRET);
    return t.app.inject({ method: 'POST', url: `/business/channels/${channelId}/slack/events`, headers: form.headers, payload: form.body });
  };
  const settled = (ts: string) => t.ctx.sqlite().sqlite.prepare('SELECT status FROM channel_inbox WHERE conversation_id = ? ORDER BY seq DESC LIMIT 1').pluck().get(`C1:${ts}`) === 'answered';
  const ask = async (text: string, user = 'U42') => {
    const ts = nextTs();
    const res = await deliver(eventCallback({ ...messageEvent({ text: `<@${fake.botUserId}> ${text}`, ts, user }), team: 'T1' }, { botUserId: fake.botUserId }));
    expect(res.statusCode, res.body).toBe(200);
    await fake.waitFor('the answer', () => settled(ts), 8_000);
    return ts;
  };
  const ratings = (ts: string) =>
    t.ctx
      .sqlite()
      .sqlite.prepare('SELECT f.rating FROM feedback f JOIN channel_messages m ON m.message_id = f.message_id WHERE m.external_id = ? ORDER BY f.created_at, f.rowid')
      .pluck()
      .all(ts);

  beforeAll(async () => {
    fake = await startFakeSlack({ botToken: BOT_TOKEN, appToken: APP_TOKEN, aiApps: true });
    t = await createTestApp({ env: { SWITCHBOARD_SLACK_API_URL: fake.apiUrl } });
    const persona = await seedSupport(t);
    const channel = await createChannel(t, {
      type: 'slack',
      name: 'AI Slack',
      personaId: persona,
      credentials: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET },
      settings: { statusMessages: ['Reading the handbook…', 'Checking the refund policy…'] },
    });
    channelId = channel.id;
    expect(channel.settings).toMatchObject({ streaming: true, feedbackButtons: true, statusMessages: ['Reading the handbook…', 'Checking the refund policy…'] });
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  it('shows a status, streams the answer natively to the user who asked, and ends it with feedback buttons', async () => {
    fake.reset();
    const ts = await ask('How long do refunds take?');
    const order = fake.calls.filter((c) => c.status === 200 && c.error === null).map((c) => c.method).filter((m) => m !== 'auth.test');
    expect(order[0]).toBe('assistant.threads.setStatus');
    expect(order).toContain('chat.startStream');
    expect(order.at(-1)).toBe('chat.stopStream');
    expect(order.indexOf('assistant.threads.setStatus')).toBeLessThan(order.indexOf('chat.startStream'));
    expect(fake.ok('assistant.threads.setStatus')[0]!.body).toMatchObject({ channel_id: 'C1', thread_ts: ts, status: 'is thinking…', loading_messages: ['Reading the handbook…', 'Checking the refund policy…'] });
    const [start] = fake.ok('chat.startStream');
    expect(start!.body).toMatchObject({ channel: 'C1', thread_ts: ts, recipient_user_id: 'U42', recipient_team_id: 'T1' });
    const streamTs = String(start!.response!.ts);
    expect(fake.text('C1', streamTs)).toContain('5 business days');
    const stop = fake.ok('chat.stopStream')[0]!;
    expect(stop.body.ts).toBe(streamTs);
    expect(stop.body.blocks).toEqual([
      {
        type: 'context_actions',
        elements: [expect.objectContaining({ type: 'feedback_buttons', action_id: 'switchboard.feedback', positive_button: expect.objectContaining({ value: 'positive' }), negative_button: expect.objectContaining({ value: 'negative' }) })],
      },
      { type: 'actions', elements: [expect.objectContaining({ type: 'button', action_id: 'switchboard.regenerate', text: { type: 'plain_text', text: 'Regenerate' } })] },
    ]);
    // Nothing posted or edited the old way.
    expect(fake.ok('chat.postMessage').filter((c) => c.body.thread_ts === ts)).toEqual([]);
    expect(fake.ok('chat.update')).toEqual([]);
  });

  it('records a feedback click as a rating of that answer, once per person, and it shows in analytics', async () => {
    const ts = await ask('And how long for exceptions?', 'U50');
    const streamTs = String(fake.ok('chat.startStream').find((c) => c.body.thread_ts === ts)!.response!.ts);
    expect((await click('U50', 'positive', streamTs, ts)).statusCode).toBe(200);
    await fake.waitFor('the rating', () => ratings(streamTs).length === 1, 5_000);
    // The same person again (or Slack retrying): nothing changes. Someone else: their own rating.
    expect((await click('U50', 'negative', streamTs, ts)).statusCode).toBe(200);
    expect((await click('U51', 'positive', streamTs, ts)).statusCode).toBe(200);
    await fake.waitFor('the second person’s rating', () => ratings(streamTs).length === 2, 5_000);
    expect(ratings(streamTs)).toEqual([5, 5]);
    const overview = (await t.request({ method: 'GET', url: `/business/analytics?timeframe=1h&metrics=satisfaction&channelId=${channelId}` })).json();
    expect(overview.metrics.satisfaction).toMatchObject({ average: 5, count: 2 });
  });

  it('asks the question again under Regenerate, once per click (a retried delivery is not asked twice)', async () => {
    const ts = await ask('How long do refunds take, roughly?', 'U70');
    const first = fake.ok('chat.startStream').find((c) => c.body.thread_ts === ts)!;
    const payload = blockActions({ user: 'U70', actionId: 'switchboard.regenerate', value: 'regenerate', channel: 'C1', messageTs: String(first.response!.ts), threadTs: ts });
    const form = signSlackForm(payload, SIGNING_SECRET);
    const send = () => t.app.inject({ method: 'POST', url: `/business/channels/${channelId}/slack/events`, headers: form.headers, payload: form.body });
    expect((await send()).statusCode).toBe(200);
    expect((await send()).statusCode).toBe(200);
    await fake.waitFor('the second answer', () => fake.ok('chat.stopStream').filter((c) => fake.ok('chat.startStream').some((s) => s.body.thread_ts === ts && s.response!.ts === c.body.ts)).length === 2, 8_000);
    const [session] = (await t.request({ method: 'GET', url: `/sessions?channelId=${channelId}&userId=U70` })).json().data;
    const messages = (await t.request({ method: 'GET', url: `/sessions/${session.id}` })).json().messages.filter((m: { role: string }) => m.role === 'user');
    expect(messages.map((m: { content: string }) => m.content)).toEqual(['How long do refunds take, roughly?', 'How long do refunds take, roughly?']);
    expect(t.ctx.sqlite().sqlite.prepare("SELECT count(*) FROM channel_inbox WHERE external_id LIKE 'regenerate:%'").pluck().get()).toBe(1);
  });

  it('falls back to posting then editing when Slack refuses streaming, remembers it, and keeps the feedback buttons', async () => {
    fake.reset();
    fake.refuse('chat.startStream', 'not_allowed');
    const ts = await ask('Refunds, please?');
    expect(fake.calls.filter((c) => c.method === 'chat.startStream')).toHaveLength(1);
    const posted = fake.ok('chat.postMessage').filter((c) => c.body.thread_ts === ts);
    expect(posted).toHaveLength(1);
    const answerTs = String(posted[0]!.response!.ts);
    expect(fake.text('C1', answerTs)).toContain('5 business days');
    const last = [...fake.ok('chat.update').filter((c) => c.body.ts === answerTs), posted[0]!].find((c) => c.body.blocks !== undefined)!;
    expect((last.body.blocks as Array<{ type: string }>).map((b) => b.type)).toEqual(['section', 'context_actions', 'actions']);

    // The channel remembers: the next answer does not try to stream.
    const again = await ask('And exceptions?');
    expect(fake.calls.filter((c) => c.method === 'chat.startStream')).toHaveLength(1);
    expect(fake.ok('chat.postMessage').filter((c) => c.body.thread_ts === again)).toHaveLength(1);
    fake.refuse('chat.startStream', null);
  });

  it('streams a handoff’s notice without answer buttons, and takes back the status of a message a person will answer', async () => {
    const team = await createTeam(t, { name: 'AI people', members: ['ed@example.com'] });
    const persona = await createPersona(t, { name: 'AI desk', instructions: 'Answer briefly.', teamId: team.id });
    const desk = (await createChannel(t, { type: 'slack', name: 'AI desk Slack', personaId: persona.id, credentials: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET } })).id;
    const send = (event: Record<string, unknown>) => {
      const raw = JSON.stringify(eventCallback({ ...event, team: 'T1' }, { botUserId: fake.botUserId }));
      return t.app.inject({ method: 'POST', url: `/business/channels/${desk}/slack/events`, headers: signSlackRequest(raw, SIGNING_SECRET), payload: raw });
    };
    const ts = nextTs();
    expect((await send(messageEvent({ text: `<@${fake.botUserId}> /human please`, ts, user: 'U80' }))).statusCode).toBe(200);
    await fake.waitFor('the notice', () => settled(ts), 8_000);
    const streamTs = String(fake.ok('chat.startStream').find((c) => c.body.thread_ts === ts)!.response!.ts);
    expect(fake.text('C1', streamTs)).toContain('passing this conversation to a person');
    const stop = fake.ok('chat.stopStream').find((c) => c.body.ts === streamTs)!;
    expect(stop.body.blocks).toBeUndefined();

    // The user writes to the person: nothing is answered here, so the thread's "is thinking…" is taken back.
    const statuses = () => fake.ok('assistant.threads.setStatus').filter((c) => c.body.thread_ts === ts).map((c) => c.body.status);
    const before = statuses().length;
    expect((await send(messageEvent({ text: 'hello?', thread_ts: ts, user: 'U80' }))).statusCode).toBe(200);
    await fake.waitFor('the status taken back', () => statuses().at(-1) === '', 8_000);
    expect(statuses().slice(before)).toEqual(['is thinking…', '']);
  });

  it('suggests prompts in a new assistant thread (from the persona’s knowledge, or the channel’s own), answers there and titles it with the first question — Events API and Socket Mode', async () => {
    fake.reset();
    const started = (channel: string, threadTs: string) =>
      eventCallback({ type: 'assistant_thread_started', assistant_thread: { user_id: 'U60', channel_id: channel, thread_ts: threadTs, context: { channel_id: 'C1', team_id: 'T1' } }, event_ts: nextTs() }, { botUserId: fake.botUserId });
    const thread = nextTs();
    expect((await deliver(started('D60', thread))).statusCode).toBe(200);
    await fake.waitFor('the suggested prompts', () => fake.ok('assistant.threads.setSuggestedPrompts').length === 1, 5_000);
    expect(fake.ok('assistant.threads.setSuggestedPrompts')[0]!.body).toMatchObject({
      channel_id: 'D60',
      thread_ts: thread,
      prompts: [{ title: 'About Refund policy', message: 'What should I know about Refund policy?' }],
    });

    // A message in the panel's thread is answered (posted then edited: this channel remembers that Slack refused streaming above) and titles the thread.
    const asked = nextTs();
    const res = await deliver(eventCallback({ ...messageEvent({ channel: 'D60', channel_type: 'im', text: 'How long do refunds take for orders paid by card?', user: 'U60', ts: asked, thread_ts: thread }), team: 'T1' }, { botUserId: fake.botUserId }));
    expect(res.statusCode).toBe(200);
    const answered = () => t.ctx.sqlite().sqlite.prepare('SELECT status FROM channel_inbox WHERE conversation_id = ?').pluck().get(`D60:${thread}`) === 'answered';
    await fake.waitFor('the answer in the panel', answered, 8_000);
    const reply = fake.ok('chat.postMessage').find((c) => c.body.channel === 'D60' && c.body.thread_ts === thread)!;
    expect(fake.text('D60', String(reply.response!.ts))).toContain('5 business days');
    expect(fake.ok('assistant.threads.setTitle').map((c) => c.body)).toEqual([expect.objectContaining({ channel_id: 'D60', thread_ts: thread, title: 'How long do refunds take for orders paid by card?' })]);

    // The channel's own prompts win; over Socket Mode too.
    const prompts = [{ title: 'Refund status', message: 'Where is my refund?' }];
    const socket = await createChannel(t, {
      type: 'slack',
      name: 'AI Slack (socket)',
      personaId: (await t.request({ method: 'GET', url: `/business/channels/${channelId}` })).json().personaId,
      credentials: { botToken: BOT_TOKEN, appToken: APP_TOKEN },
      settings: { suggestedPrompts: prompts },
    });
    expect(socket.status).toBe('connected');
    const socketThread = nextTs();
    fake.socket.push(started('D61', socketThread));
    await fake.waitFor('the prompts over Socket Mode', () => fake.ok('assistant.threads.setSuggestedPrompts').some((c) => c.body.channel_id === 'D61'), 5_000);
    expect(fake.ok('assistant.threads.setSuggestedPrompts').find((c) => c.body.channel_id === 'D61')!.body.prompts).toEqual(prompts);
  });
});
