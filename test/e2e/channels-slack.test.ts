// API.md §9 end to end with the real @slack/bolt: Switchboard's channels service and Events API
// route, the Slack bridge, and a fake Slack Web API on 127.0.0.1. A mention is answered in its
// thread by the persona, recorded as a session with analytics and A/B variant; duplicates are
// answered once; reactions become feedback; a restart answers what was left unanswered, once.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { type AppContext, createContext } from '../../src/context.js';
import { type FakeSlack, startFakeSlack } from '../fakes/slack-api.js';
import { appMentionEvent, blockActions, eventCallback, messageEvent, nextTs, reactionEvent, signSlackCommand, signSlackForm, signSlackRequest, slashCommand } from '../fakes/slack-events.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createAbTest, createChannel, createPersona, createTeam } from '../helpers/factories.js';
import { captureLogs } from '../helpers/mcp-tools.js';
import { expectProblem } from '../helpers/problem.js';
import { REFUND_TEXT, seedSupport } from '../integration/chat-helpers.js';

const BOT_TOKEN = 'xoxb-e2e-bot-token';
const SIGNING_SECRET = 'e2e-signing-secret';

describe('Slack channel end to end', { timeout: 30_000 }, () => {
  let fake: FakeSlack;
  let t: TestApp;
  let persona: string;
  let channelId: string;
  const logs = captureLogs();

  /** A signed Events API delivery to the channel's route; a string is sent as the raw body. */
  const deliver = (body: Record<string, unknown> | string, headers: Record<string, string> = {}, id = channelId) => {
    const raw = typeof body === 'string' ? body : JSON.stringify(body);
    return t.app.inject({ method: 'POST', url: `/business/channels/${id}/slack/events`, headers: { ...signSlackRequest(raw, SIGNING_SECRET), ...headers }, payload: raw });
  };
  /** Whether the thread's latest message is answered and settled (reply parts recorded, session stored). */
  const settled = (threadTs: string) =>
    t.ctx.sqlite().sqlite.prepare('SELECT status FROM channel_inbox WHERE conversation_id = ? ORDER BY seq DESC LIMIT 1').pluck().get(`C1:${threadTs}`) === 'answered';
  /**
   * A person's mention in the thread, delivered after what a test expects to be ignored or answered
   * once: it waits until the barrier itself is answered, so anything delivered before it that was
   * going to be stored or answered has been.
   */
  const barrier = async (threadTs: string) => {
    const posts = threadPosts(threadTs).length;
    const message = eventCallback(messageEvent({ text: `<@${fake.botUserId}> refunds, again?`, thread_ts: threadTs }), { botUserId: fake.botUserId });
    expect((await deliver(message)).statusCode).toBe(200);
    await fake.waitFor('the barrier answer', () => settled(threadTs) && threadPosts(threadTs).length > posts, 8_000);
  };
  /** Replies posted or edited in a thread, in order. */
  const threadPosts = (threadTs: string) => fake.ok('chat.postMessage').filter((c) => c.body.thread_ts === threadTs);
  const finalText = (threadTs: string) => {
    const posted = threadPosts(threadTs)[0];
    const edits = fake.ok('chat.update').filter((c) => c.body.ts === posted?.response?.ts);
    return String((edits.at(-1) ?? posted)?.body.text ?? '');
  };

  beforeAll(async () => {
    fake = await startFakeSlack({ botToken: BOT_TOKEN });
    t = await createTestApp({ env: { SWITCHBOARD_SLACK_API_URL: fake.apiUrl, LOG_LEVEL: 'trace' }, overrides: { logger: logs.logger } });
    persona = await seedSupport(t);
    channelId = (await createChannel(t, { type: 'slack', name: 'Support Slack', personaId: persona, credentials: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET } })).id;
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  it('connects with auth.test, and reports refused credentials in words', async () => {
    expect((await t.request({ method: 'GET', url: `/business/channels/${channelId}` })).json()).toMatchObject({ type: 'slack', status: 'connected', statusDetail: null });
    expect(fake.ok('auth.test').length).toBeGreaterThan(0);
    const bad = await createChannel(t, { type: 'slack', name: 'Wrong token', personaId: persona, credentials: { botToken: 'xoxb-wrong', signingSecret: SIGNING_SECRET } });
    expect(bad.status).toBe('error');
    expect(bad.statusDetail).toContain('invalid_auth');
  });

  it('answers a mention in its thread, recorded as a session of the channel', async () => {
    const ts = nextTs();
    const message = messageEvent({ text: `<@${fake.botUserId}> How long do refunds take?`, ts, user: 'U42' });
    // Acknowledged before the answer (slack-bridge.test.ts proves it with a held answer; a wall-clock
    // bound here would only measure the machine's load).
    const res = await deliver(eventCallback(message, { botUserId: fake.botUserId }));
    expect(res.statusCode, res.body).toBe(200);
    await deliver(eventCallback(appMentionEvent(message), { botUserId: fake.botUserId }));
    await fake.waitFor('the threaded answer', () => settled(ts) && finalText(ts).includes('5 business days'), 8_000);
    expect(threadPosts(ts)).toHaveLength(1);
    expect(threadPosts(ts)[0]!.body.channel).toBe('C1');
    expect(finalText(ts)).toContain(REFUND_TEXT.slice(0, 30));

    const sessions = (await t.request({ method: 'GET', url: `/sessions?channelId=${channelId}` })).json().data;
    expect(sessions).toHaveLength(1);
    expect(sessions[0]).toMatchObject({ channelId, userId: 'U42', personaId: persona, messageCount: 2 });
    const analytics = (await t.request({ method: 'GET', url: `/business/analytics/conversations?timeframe=1h&channelId=${channelId}` })).json();
    expect(analytics.total).toBe(1);
  });

  it('hands a thread to a person of the persona’s team: the member accepts, their replies reach the user in the thread, and after hand back the persona answers again', async () => {
    const team = await createTeam(t, { name: 'Support people', members: ['ada@example.com'] });
    const desk = await createPersona(t, { name: 'Refund desk', instructions: 'Answer questions about refunds.', teamId: team.id });
    await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'Refunds', content: REFUND_TEXT, personaId: desk.id } });
    await t.ctx.services.knowledge.idle();
    const deskChannel = (await createChannel(t, { type: 'slack', name: 'Desk Slack', personaId: desk.id, credentials: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET } })).id;
    const ts = nextTs();
    const mention = (text: string, extra: Record<string, unknown> = {}) =>
      deliver(eventCallback(messageEvent({ text: `<@${fake.botUserId}> ${text}`, user: 'U77', ...extra }), { botUserId: fake.botUserId }), {}, deskChannel);
    const inThread = () => fake.ok('chat.postMessage').filter((c) => c.body.thread_ts === ts).map((c) => String(c.body.text));

    expect((await mention('/human my refund never arrived', { ts })).statusCode).toBe(200);
    await fake.waitFor('the hand-over notice', () => settled(ts) && inThread().some((x) => x.includes('passing this conversation to a person')), 8_000);
    const [session] = (await t.request({ method: 'GET', url: `/sessions?channelId=${deskChannel}` })).json().data;
    const [handoff] = (await t.request({ method: 'GET', url: '/handoffs?status=offered' })).json().data.filter((h: { sessionId: string }) => h.sessionId === session.id);
    expect(handoff).toMatchObject({ member: 'ada@example.com', trigger: 'user', reason: 'my refund never arrived' });

    const accepted = await t.request({ method: 'POST', url: `/handoffs/${handoff.id}/accept`, body: { member: 'ada@example.com' } });
    expect(accepted.statusCode, accepted.body).toBe(200);
    await t.ctx.services.handoffs.deliver();
    expect(inThread().at(-1)).toBe('ada@example.com (a person) joined the conversation.');

    // The user writes while a person has the thread: stored for them, nothing posted by the persona.
    const posts = inThread().length;
    expect((await mention('is anyone there?', { thread_ts: ts })).statusCode).toBe(200);
    const latest = t.ctx.sqlite().sqlite.prepare('SELECT content FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1').pluck();
    await fake.waitFor('the message to be stored, silently', () => latest.get(session.id) === 'is anyone there?' && settled(ts), 8_000);
    expect((await t.request({ method: 'GET', url: `/handoffs/${handoff.id}` })).json().messages.at(-1)).toMatchObject({ role: 'user', content: 'is anyone there?' });
    expect(inThread()).toHaveLength(posts);
    // Once a person has joined, users stop mentioning the bot: a plain reply in the thread is for the person too.
    const plain = (text: string) => deliver(eventCallback(messageEvent({ text, user: 'U77', thread_ts: ts }), { botUserId: fake.botUserId }), {}, deskChannel);
    expect((await plain('my order number is 1234')).statusCode).toBe(200);
    await fake.waitFor('the plain reply to be stored, silently', () => latest.get(session.id) === 'my order number is 1234' && settled(ts), 8_000);
    expect(inThread()).toHaveLength(posts);

    await t.request({ method: 'POST', url: `/handoffs/${handoff.id}/messages`, body: { member: 'ada@example.com', text: 'Hi, Ada here: your refund left today.' } });
    await t.request({ method: 'POST', url: `/handoffs/${handoff.id}/return`, body: { member: 'ada@example.com' } });
    await t.ctx.services.handoffs.deliver();
    expect(inThread().slice(posts)).toEqual(['Hi, Ada here: your refund left today.', 'ada@example.com (a person) left the conversation; Refund desk takes over again.']);

    // Handed back: a plain reply is not for the persona (respondTo: mentions) and is dropped; a mention is answered again, with the person's reply in its history.
    expect((await plain('thanks, Ada')).statusCode).toBe(200);
    expect((await mention('How long do refunds take?', { thread_ts: ts })).statusCode).toBe(200);
    await fake.waitFor('the persona’s answer', () => settled(ts) && inThread().length > posts + 2, 8_000);
    const history = (await t.request({ method: 'GET', url: `/sessions/${session.id}` })).json().messages;
    expect(history.map((m: { author?: string }) => m.author ?? null)).toContain('human:ada@example.com');
    expect(history.map((m: { content: string }) => m.content)).not.toContain('thanks, Ada');
  });

  it('works a handoff from Slack: the card with Accept in the team’s channel, a click accepts, the member’s thread replies reach the user, Hand back returns the thread to the persona', async () => {
    const team = await createTeam(t, { name: 'Billing people', members: ['ada@example.com', 'bo@example.com'] });
    const desk = await createPersona(t, { name: 'Billing desk', instructions: 'Answer questions about refunds.', teamId: team.id });
    await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'Refunds', content: REFUND_TEXT, personaId: desk.id } });
    await t.ctx.services.knowledge.idle();
    const userChannel = (await createChannel(t, { type: 'slack', name: 'Billing Slack', personaId: desk.id, credentials: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET } })).id;
    const set = await t.request({
      method: 'PUT',
      url: `/business/teams/${team.id}/handoff`,
      body: { desk: { channelId: userChannel, conversation: 'CTEAM' }, chatUsers: [{ email: 'ada@example.com', chatUserId: 'UADA' }, { email: 'BO@example.com', chatUserId: 'UBO' }] },
    });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json().handoff.desk).toEqual({ channelId: userChannel, conversation: 'CTEAM' });
    expect(set.json().members.map((m: { chatUserId: string }) => m.chatUserId)).toEqual(['UADA', 'UBO']);

    const ts = nextTs();
    const post = (body: Record<string, unknown>) => deliver(eventCallback(body, { botUserId: fake.botUserId }), {}, userChannel);
    const click = (user: string, actionId: string, value: string, messageTs: string, threadTs?: string) => {
      const form = signSlackForm(blockActions({ user, actionId, value, channel: 'CTEAM', messageTs, ...(threadTs ? { threadTs } : {}) }), SIGNING_SECRET);
      return t.app.inject({ method: 'POST', url: `/business/channels/${userChannel}/slack/events`, headers: form.headers, payload: form.body });
    };
    const posts = (channel: string, thread?: string) =>
      fake.ok('chat.postMessage').filter((c) => c.body.channel === channel && (thread === undefined || c.body.thread_ts === thread));
    const texts = (channel: string, thread: string) => posts(channel, thread).map((c) => String(c.body.text));
    const deliverAll = () => t.ctx.services.handoffs.deliver();

    expect((await post(messageEvent({ text: `<@${fake.botUserId}> /human I was charged twice`, user: 'U77', ts }))).statusCode).toBe(200);
    await fake.waitFor('the hand-over notice', () => settled(ts) && texts('C1', ts).some((x) => x.includes('passing this conversation to a person')), 8_000);
    // A notice is no answer: no Good/Bad, no Regenerate under it (posted, or written in an edit).
    const notice = posts('C1', ts).find((c) => String(c.body.text).includes('passing this conversation to a person'))!;
    const noticeTs = String(notice.response!.ts);
    const noticeCalls = [notice, ...fake.ok('chat.update').filter((c) => c.body.ts === noticeTs)];
    expect(noticeCalls.map((c) => c.body.blocks ?? null)).toEqual(noticeCalls.map(() => null));
    // Regenerate clicked on a notice (one posted with the buttons before they left notices) asks nothing again.
    const regenerate = signSlackForm(blockActions({ user: 'U77', actionId: 'switchboard.regenerate', value: 'regenerate', channel: 'C1', messageTs: noticeTs, threadTs: ts }), SIGNING_SECRET);
    expect((await t.app.inject({ method: 'POST', url: `/business/channels/${userChannel}/slack/events`, headers: regenerate.headers, payload: regenerate.body })).statusCode).toBe(200);
    await deliverAll();
    const [card] = posts('CTEAM').filter((c) => c.body.thread_ts === undefined);
    expect(card, 'the card in the team channel').toBeDefined();
    const [handoff] = (await t.request({ method: 'GET', url: '/handoffs?status=queued,offered' })).json().data.filter((h: { personaId: string }) => h.personaId === desk.id);
    expect(handoff).toMatchObject({ status: 'offered', member: 'ada@example.com', trigger: 'user' });
    expect(String(card!.body.text)).toContain('I was charged twice');
    expect(String(card!.body.text)).toContain('Offered to <@UADA> (ada@example.com)');
    const blocks = card!.body.blocks as Array<{ type: string; elements?: Array<Record<string, unknown>> }>;
    expect(blocks.find((b) => b.type === 'actions')?.elements).toEqual([
      { type: 'button', action_id: 'handoff.accept', value: handoff.id, text: { type: 'plain_text', text: 'Accept' }, style: 'primary' },
    ]);
    const cardTs = String(card!.response!.ts);

    // Someone in the channel who is no member of the team: told so in the thread, nothing changes.
    expect((await click('UXX', 'handoff.accept', handoff.id, cardTs)).statusCode).toBe(200);
    await fake.waitFor('the stranger told', () => texts('CTEAM', cardTs).some((x) => x.includes('<@UXX> is not a member of Billing people')), 8_000);
    // Bo (not the one offered) accepts from Slack; Ada's later click is told who has it.
    expect((await click('UBO', 'handoff.accept', handoff.id, cardTs)).statusCode).toBe(200);
    await fake.waitFor('the accepted line', () => texts('CTEAM', cardTs).some((x) => x.startsWith('<@UBO> (bo@example.com) accepted')), 8_000);
    expect((await t.request({ method: 'GET', url: `/handoffs/${handoff.id}` })).json()).toMatchObject({ status: 'accepted', member: 'bo@example.com' });
    await fake.waitFor('the user told a person joined', () => texts('C1', ts).includes('bo@example.com (a person) joined the conversation.'), 8_000);
    expect((await click('UADA', 'handoff.accept', handoff.id, cardTs, cardTs)).statusCode).toBe(200);
    await fake.waitFor('Ada told who has it', () => texts('CTEAM', cardTs).some((x) => x.includes('accepted by bo@example.com')), 8_000);
    const accepted = posts('CTEAM', cardTs).find((c) => String(c.body.text).startsWith('<@UBO> (bo@example.com) accepted'))!;
    const done = (accepted.body.blocks as Array<{ type: string; elements?: Array<{ action_id: string }> }>).find((b) => b.type === 'actions')!.elements!.map((e) => e.action_id);
    expect(done).toEqual(['handoff.return', 'handoff.resolve']);

    // The user writes a plain reply (no mention: a person has the thread): the member sees it in the desk thread. Bo's reply there (no mention) reaches the user, once across a retry.
    expect((await post(messageEvent({ text: 'is anyone there?', user: 'U77', thread_ts: ts }))).statusCode).toBe(200);
    await fake.waitFor('the user’s message in the desk thread', () => texts('CTEAM', cardTs).includes('User: is anyone there?'), 8_000);
    const reply = eventCallback(messageEvent({ channel: 'CTEAM', text: 'Hi, Bo here: the second charge is refunded.', user: 'UBO', thread_ts: cardTs }), { botUserId: fake.botUserId });
    expect((await deliver(reply, {}, userChannel)).statusCode).toBe(200);
    expect((await deliver(reply, { 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_timeout' }, userChannel)).statusCode).toBe(200);
    await fake.waitFor('Bo’s reply in the user’s thread', () => texts('C1', ts).includes('Hi, Bo here: the second charge is refunded.'), 8_000);
    // Ada writes in the thread: not relayed, she is told.
    expect((await deliver(eventCallback(messageEvent({ channel: 'CTEAM', text: 'I can take it', user: 'UADA', thread_ts: cardTs }), { botUserId: fake.botUserId }), {}, userChannel)).statusCode).toBe(200);
    await fake.waitFor('Ada told', () => texts('CTEAM', cardTs).some((x) => x.includes('<@UADA> (ada@example.com): this conversation is with bo@example.com')), 8_000);
    await deliverAll();
    expect(texts('C1', ts).filter((x) => x === 'Hi, Bo here: the second charge is refunded.')).toHaveLength(1);
    expect(texts('C1', ts)).not.toContain('I can take it');
    const messages = (await t.request({ method: 'GET', url: `/handoffs/${handoff.id}` })).json().messages;
    expect(messages.filter((m: { author: string | null }) => m.author === 'human:bo@example.com').map((m: { content: string }) => m.content)).toEqual(['Hi, Bo here: the second charge is refunded.']);
    // The Regenerate click on the notice (handled long since: every step above waited on the same channel) re-sent no `/human`.
    expect(messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: string }) => m.content)).toEqual(['/human I was charged twice', 'is anyone there?']);
    expect(texts('CTEAM', cardTs).filter((x) => x.startsWith('User:'))).toEqual(['User: is anyone there?']);

    // Bo hands back from Slack: the user is told, and the persona answers the thread again with Bo's reply in its history.
    expect((await click('UBO', 'handoff.return', handoff.id, String(accepted.response!.ts), cardTs)).statusCode).toBe(200);
    await fake.waitFor('the hand-back notice', () => texts('C1', ts).includes('bo@example.com (a person) left the conversation; Billing desk takes over again.'), 8_000);
    await fake.waitFor('the desk told', () => texts('CTEAM', cardTs).includes('bo@example.com handed the conversation back to Billing desk.'), 8_000);
    const before = texts('C1', ts).length;
    expect((await post(messageEvent({ text: `<@${fake.botUserId}> How long do refunds take?`, user: 'U77', thread_ts: ts }))).statusCode).toBe(200);
    await fake.waitFor('the persona’s answer', () => settled(ts) && texts('C1', ts).length > before, 8_000);
    const [session] = (await t.request({ method: 'GET', url: `/sessions?channelId=${userChannel}` })).json().data;
    const history = (await t.request({ method: 'GET', url: `/sessions/${session.id}` })).json().messages;
    expect(history.map((m: { author?: string }) => m.author ?? null)).toContain('human:bo@example.com');
    const analytics = (await t.request({ method: 'GET', url: '/business/analytics/handoffs?timeframe=1h' })).json();
    expect(analytics.byTeam.find((r: { teamId: string }) => r.teamId === team.id)).toMatchObject({ handoffs: 1 });
    expect(analytics.byPersona.find((r: { personaId: string }) => r.personaId === desk.id)).toMatchObject({ handoffs: 1 });
  });

  it('sends a handoff’s card to the offered member’s Slack DMs with a `dm` desk: they accept there and their replies in that thread reach the user', async () => {
    const team = await createTeam(t, { name: 'Night shift', members: ['cy@example.com'] });
    const desk = await createPersona(t, { name: 'Night desk', instructions: 'Answer briefly.', teamId: team.id });
    const userChannel = (await createChannel(t, { type: 'slack', name: 'Night Slack', personaId: desk.id, credentials: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET } })).id;
    const set = await t.request({ method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { desk: { channelId: userChannel, conversation: 'dm' }, chatUsers: [{ email: 'cy@example.com', chatUserId: 'UCY' }] } });
    expect(set.statusCode, set.body).toBe(200);
    const ts = nextTs();
    expect((await deliver(eventCallback(messageEvent({ text: `<@${fake.botUserId}> /human <!here> please`, user: 'U78', ts }), { botUserId: fake.botUserId }), {}, userChannel)).statusCode).toBe(200);
    await fake.waitFor('the hand-over notice', () => settled(ts), 8_000);
    await t.ctx.services.handoffs.deliver();
    const card = await (async () => {
      await fake.waitFor('the card in Cy’s DMs', () => fake.ok('chat.postMessage').some((c) => c.body.channel === 'UCY'), 8_000);
      return fake.ok('chat.postMessage').find((c) => c.body.channel === 'UCY')!;
    })();
    expect(card.response!.channel).toBe('DCY');
    // What the user wrote pings nobody at the desk.
    expect(String(card.body.text)).toContain('@here please');
    expect(String(card.body.text)).not.toContain('<!here>');
    const handoffId = (card.body.blocks as Array<{ type: string; elements?: Array<{ value: string }> }>).find((b) => b.type === 'actions')!.elements![0]!.value;
    const form = signSlackForm({ ...blockActions({ user: 'UCY', actionId: 'handoff.accept', value: handoffId, channel: 'DCY', messageTs: String(card.response!.ts) }) }, SIGNING_SECRET);
    expect((await t.app.inject({ method: 'POST', url: `/business/channels/${userChannel}/slack/events`, headers: form.headers, payload: form.body })).statusCode).toBe(200);
    await fake.waitFor('accepted', () => fake.ok('chat.postMessage').some((c) => c.body.channel === 'DCY' && String(c.body.text).startsWith('<@UCY> (cy@example.com) accepted')), 8_000);
    const reply = messageEvent({ channel: 'DCY', channel_type: 'im', text: 'Cy here.', user: 'UCY', thread_ts: String(card.response!.ts) });
    expect((await deliver(eventCallback(reply, { botUserId: fake.botUserId }), {}, userChannel)).statusCode).toBe(200);
    await fake.waitFor('Cy’s reply to the user', () => fake.ok('chat.postMessage').some((c) => c.body.channel === 'C1' && c.body.thread_ts === ts && c.body.text === 'Cy here.'), 8_000);

    // A user of the HTTP API writes Slack markup: shown at the desk, it pings nobody.
    const asked = await t.request({ method: 'POST', url: '/query', body: { personaId: desk.id, message: '/human <@UBOSS> <!channel> said so' } });
    expect(asked.statusCode, asked.body).toBe(200);
    await t.ctx.services.handoffs.deliver();
    const second = fake.ok('chat.postMessage').filter((c) => c.body.channel === 'UCY').at(-1)!;
    expect(String(second.body.text)).toContain('‹@UBOSS&gt; ‹!channel&gt; said so');
    expect(String(second.body.text)).not.toMatch(/<[@!](UBOSS|channel)/);
  });

  it('hands over on the /human slash command: the bot starts a thread where it was typed, the notice and the person’s replies go there', async () => {
    const team = await createTeam(t, { name: 'Slash people', members: ['di@example.com'] });
    const desk = await createPersona(t, { name: 'Slash desk', instructions: 'Answer briefly.', teamId: team.id });
    const userChannel = (await createChannel(t, { type: 'slack', name: 'Slash Slack', personaId: desk.id, credentials: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET } })).id;
    const command = signSlackCommand(slashCommand({ text: 'my parcel is lost', user: 'U90', channel: 'C5', responseUrl: fake.responseUrl }), SIGNING_SECRET);
    const res = await t.app.inject({ method: 'POST', url: `/business/channels/${userChannel}/slack/events`, headers: command.headers, payload: command.body });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).toBe('');
    const inC5 = () => fake.ok('chat.postMessage').filter((c) => c.body.channel === 'C5');
    await fake.waitFor('the thread and its notice', () => inC5().some((c) => String(c.body.text).includes('passing this conversation to a person')), 8_000);
    const [root, notice] = inC5();
    expect(root!.body).toMatchObject({ text: '<@U90> asked for a person: my parcel is lost' });
    const rootTs = String(root!.response!.ts);
    expect(notice!.body).toMatchObject({ thread_ts: rootTs });
    expect(notice!.body.blocks).toBeUndefined();
    const [session] = (await t.request({ method: 'GET', url: `/sessions?channelId=${userChannel}` })).json().data;
    expect(session).toMatchObject({ userId: 'U90', personaId: desk.id });
    const [handoff] = (await t.request({ method: 'GET', url: '/handoffs?status=offered' })).json().data.filter((h: { sessionId: string }) => h.sessionId === session.id);
    expect(handoff).toMatchObject({ trigger: 'user', reason: 'my parcel is lost', member: 'di@example.com' });

    // The thread is the conversation: a plain reply there is for the person; their reply comes back there.
    expect((await deliver(eventCallback(messageEvent({ channel: 'C5', text: 'it was due Monday', user: 'U90', thread_ts: rootTs }), { botUserId: fake.botUserId }), {}, userChannel)).statusCode).toBe(200);
    const latest = t.ctx.sqlite().sqlite.prepare('SELECT content FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1').pluck();
    await fake.waitFor('the reply stored for the person', () => latest.get(session.id) === 'it was due Monday', 8_000);
    await t.request({ method: 'POST', url: `/handoffs/${handoff.id}/accept`, body: { member: 'di@example.com' } });
    await t.request({ method: 'POST', url: `/handoffs/${handoff.id}/messages`, body: { member: 'di@example.com', text: 'Di here: found it.' } });
    await t.ctx.services.handoffs.deliver();
    await fake.waitFor('Di’s reply in the thread', () => inC5().some((c) => c.body.thread_ts === rootTs && c.body.text === 'Di here: found it.'), 8_000);
    const messages = (await t.request({ method: 'GET', url: `/handoffs/${handoff.id}` })).json().messages;
    expect(messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: string }) => m.content)).toEqual(['/human my parcel is lost', 'it was due Monday']);
  });

  it('answers a retried delivery once, ignores its own and other bots’ messages, and answers url_verification', async () => {
    const ts = nextTs();
    const callback = eventCallback(messageEvent({ text: `<@${fake.botUserId}> refunds?`, ts }), { botUserId: fake.botUserId });
    await deliver(callback);
    await deliver(callback, { 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_timeout' });
    await fake.waitFor('the answer', () => settled(ts) && threadPosts(ts).length > 0, 8_000);
    // A barrier: a person's message delivered after the retry. Once it is answered, an answer to the
    // retry would have been stored and posted before it, so none now means none ever.
    await barrier(ts);
    expect(threadPosts(ts)).toHaveLength(2); // the first answer and the barrier's, no second answer
    const rows = t.ctx.sqlite().sqlite.prepare('SELECT count(*) FROM channel_inbox WHERE channel_id = ? AND external_id = ?').pluck().get(channelId, callback.event_id);
    expect(rows).toBe(1);

    const botTs = nextTs();
    const own = eventCallback(messageEvent({ text: `<@${fake.botUserId}> echo`, ts: botTs, user: fake.botUserId, bot_id: fake.botId }));
    const otherBot = eventCallback(messageEvent({ text: `<@${fake.botUserId}> hello from a bot`, thread_ts: botTs, bot_id: 'BOTHER', subtype: 'bot_message' }));
    await deliver(own);
    await deliver(otherBot);
    await barrier(botTs);
    const stored = t.ctx.sqlite().sqlite.prepare('SELECT count(*) FROM channel_inbox WHERE channel_id = ? AND external_id IN (?, ?)').pluck().get(channelId, own.event_id, otherBot.event_id);
    expect(stored).toBe(0);
    expect(threadPosts(botTs)).toHaveLength(1); // the barrier's answer only

    const challenge = await deliver({ type: 'url_verification', challenge: 'c-123', token: 'x' });
    expect(challenge.statusCode).toBe(200);
    expect(challenge.body).toContain('c-123');
  });

  it('answers a signed body that is no Slack delivery with a problem+json 400, and acknowledges unknown event types', async () => {
    const callback = eventCallback(messageEvent({ text: `<@${fake.botUserId}> hi` }), { botUserId: fake.botUserId });
    for (const [body, code, path] of [
      [{ ...callback, event: null }, 'validation_failed', 'event'],
      [{ ...callback, event: 'a string' }, 'validation_failed', 'event'],
      [{ ...callback, event: 42 }, 'validation_failed', 'event'],
      ['null', 'validation_failed', 'body'],
      ['[]', 'validation_failed', 'body'],
      ['\0', 'invalid_json', undefined],
      ['', 'validation_failed', 'type'],
    ] as const) {
      expectProblem(await deliver(body), 400, code, path);
    }
    const before = fake.ok('chat.postMessage').length;
    const unknown = await deliver(eventCallback({ type: 'team_rename', name: 'Renamed' }));
    expect(unknown.statusCode, unknown.body).toBe(200);
    expect(unknown.body).toBe('');
    // Nothing refused was answered: the channel posted nothing.
    expect(fake.ok('chat.postMessage').length).toBe(before);
  });

  it('refuses a bad or stale signature (401) and a disabled channel (409)', async () => {
    const raw = JSON.stringify(eventCallback(messageEvent({ text: 'hi' })));
    const bad = await t.app.inject({ method: 'POST', url: `/business/channels/${channelId}/slack/events`, headers: signSlackRequest(raw, 'not-the-secret'), payload: raw });
    expectProblem(bad, 401, 'unauthorized');
    const stale = await t.app.inject({ method: 'POST', url: `/business/channels/${channelId}/slack/events`, headers: signSlackRequest(raw, SIGNING_SECRET, Math.floor(Date.now() / 1000) - 600), payload: raw });
    expectProblem(stale, 401, 'unauthorized');
    expectProblem(await deliver(eventCallback(messageEvent({ text: 'x' })), {}, 'chn_nope'), 404, 'not_found');
    // A Slack channel is not a webhook: its id on the webhook route is unknown there.
    const webhookBody = JSON.stringify({ conversationId: 'c', message: 'hi' });
    expectProblem(await t.app.inject({ method: 'POST', url: `/business/channels/${channelId}/inbound`, headers: { 'content-type': 'application/json', 'x-switchboard-signature': 'sha256=00' }, payload: webhookBody }), 404, 'not_found');

    const other = await createChannel(t, { type: 'slack', name: 'Paused', personaId: persona, credentials: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET }, settings: { enabled: false } });
    expect(other.status).toBe('disabled');
    expectProblem(await deliver(eventCallback(messageEvent({ text: 'x' })), {}, other.id), 409, 'conflict');
  });

  it('turns 👍 and 👎 on a reply into feedback on that answer', async () => {
    const ts = nextTs();
    await deliver(eventCallback(messageEvent({ text: `<@${fake.botUserId}> refunds please`, ts }), { botUserId: fake.botUserId }));
    await fake.waitFor('the answer', () => settled(ts) && finalText(ts).includes('5 business days'), 8_000);
    const replyTs = String(threadPosts(ts)[0]!.response!.ts);
    await deliver(eventCallback(reactionEvent({ reaction: '+1', ts: replyTs, itemUser: fake.botUserId })));
    const rating = () => t.ctx.sqlite().sqlite.prepare("SELECT rating FROM feedback f JOIN channel_messages m ON m.message_id = f.message_id WHERE m.external_id = ? ORDER BY f.seq").pluck().all(replyTs);
    await fake.waitFor('the 👍 feedback', () => rating().length === 1, 5_000);
    expect(rating()).toEqual([5]);
    await deliver(eventCallback(reactionEvent({ reaction: '-1', ts: replyTs, itemUser: fake.botUserId })));
    await fake.waitFor('the 👎 feedback', () => rating().length === 2, 5_000);
    expect(rating()).toEqual([5, 1]);
  });

  it('routes a channel through its running A/B test and records the variant', async () => {
    const b = (await createPersona(t, { name: 'Slack B' })).id;
    const test = await createAbTest(t, { personaA: persona, personaB: b });
    await t.request({ method: 'PUT', url: `/business/ab-tests/${test.id}/start` });
    const ab = await createChannel(t, { type: 'slack', name: 'A/B Slack', abTestId: test.id, credentials: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET }, settings: { respondTo: 'all' } });
    const ts = nextTs();
    await deliver(eventCallback(messageEvent({ text: 'what about refunds', ts, user: 'U-ab' })), {}, ab.id);
    await fake.waitFor('the answer', () => settled(ts) && threadPosts(ts).length > 0, 8_000);
    const session = (await t.request({ method: 'GET', url: `/sessions?channelId=${ab.id}` })).json().data[0];
    expect(session).toMatchObject({ abTestId: test.id, userId: 'U-ab' });
    expect(session.personaId).toBe(session.variant === 'A' ? persona : b);
    await t.request({ method: 'PUT', url: `/business/ab-tests/${test.id}/stop` });
  });

  it('sends to a conversation: 202 with Slack’s ts as externalId, high priority marked, and through slack.send_message', async () => {
    const res = await t.request({ method: 'POST', url: `/business/channels/${channelId}/send`, body: { to: 'C9', message: 'Maintenance tonight', priority: 'high' } });
    expect(res.statusCode, res.body).toBe(202);
    const posted = fake.ok('chat.postMessage').filter((c) => c.body.channel === 'C9');
    expect(posted).toHaveLength(1);
    expect(res.json()).toMatchObject({ channelId, status: 'sent', externalId: String(posted[0]!.response!.ts) });
    expect(String(posted[0]!.body.text)).toMatch(/^🔴 Maintenance tonight/);

    const viaTool = await t.request({
      method: 'POST',
      url: '/api/mcp/tools/execute',
      body: { toolName: 'slack', action: 'send_message', parameters: { channel: 'Support Slack/C10', message: 'From a tool' } },
    });
    expect(viaTool.json(), viaTool.body).toMatchObject({ status: 'succeeded' });
    expect(fake.ok('chat.postMessage').some((c) => c.body.channel === 'C10' && String(c.body.text).includes('From a tool'))).toBe(true);
  });

  it('keeps the bot token and signing secret out of every log line and answer', async () => {
    const text = logs.text();
    expect(text).toContain(channelId);
    expect(text.length).toBeGreaterThan(1000);
    for (const secret of [BOT_TOKEN, SIGNING_SECRET]) expect(text.includes(secret), `a log line holds ${secret}`).toBe(false);
    // Every route that answers with a channel: create, read, list, settings.
    const created = await t.request({ method: 'POST', url: '/business/channels', body: { type: 'slack', name: 'Secrets check', personaId: persona, credentials: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET } } });
    expect(created.statusCode, created.body).toBe(201);
    const answers = [
      created,
      await t.request({ method: 'GET', url: `/business/channels/${created.json().id}` }),
      await t.request({ method: 'GET', url: '/business/channels?limit=100' }),
      await t.request({ method: 'PUT', url: `/business/channels/${created.json().id}/settings`, body: { respondTo: 'all' } }),
    ];
    for (const res of answers) {
      expect(res.statusCode, res.body).toBeLessThan(300);
      expect(res.body).toContain(created.json().id);
      for (const secret of [BOT_TOKEN, SIGNING_SECRET]) expect(res.body.includes(secret), `${res.body} holds ${secret}`).toBe(false);
    }
  });
});

describe('a restart answers what was left unanswered, once', { timeout: 30_000 }, () => {
  it('answers recent pending messages after a restart, expires old ones, and never repeats an answered one', async () => {
    const fake = await startFakeSlack({ botToken: BOT_TOKEN });
    const t = await createTestApp({ env: { SWITCHBOARD_SLACK_API_URL: fake.apiUrl } });
    const env = { SWITCHBOARD_DATA_DIR: t.dataDir, LOG_LEVEL: 'silent', SWITCHBOARD_RATE_LIMIT: '0', SWITCHBOARD_SLACK_API_URL: fake.apiUrl };
    let second: AppContext | undefined;
    try {
      const persona = await seedSupport(t);
      const channel = await createChannel(t, { type: 'slack', personaId: persona, credentials: { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET } });
      // What a crash leaves: stored messages, not answered (one recent, one old, one answered already).
      const store = (externalId: string, ts: string, status: string, receivedAt: Date) =>
        t.ctx.sqlite().sqlite
          .prepare('INSERT INTO channel_inbox (channel_id, external_id, conversation_id, payload, status, received_at) VALUES (?, ?, ?, ?, ?, ?)')
          .run(channel.id, externalId, `C1:${ts}`, JSON.stringify({ externalId, conversationId: `C1:${ts}`, conversationRef: 'C1', userId: 'U7', text: 'How long do refunds take?', direct: false, mentioned: true, replyTo: { channel: 'C1', thread_ts: ts } }), status, receivedAt.toISOString());
      const recent = nextTs();
      const old = nextTs();
      const done = nextTs();
      store('Ev-recent', recent, 'pending', new Date());
      store('Ev-old', old, 'pending', new Date(Date.now() - 60 * 60_000));
      store('Ev-done', done, 'answered', new Date());
      await t.app.close();
      await t.ctx.close();

      second = await createContext(loadConfig(env));
      await second.services.channels.startAll();
      const db = second.sqlite().sqlite;
      const statusOf = (externalId: string) => db.prepare('SELECT status FROM channel_inbox WHERE external_id = ?').pluck().get(externalId);
      // Recovery answers in order; wait until it has been through every row.
      // Settled, not merely claimed: a row being expired is `answering` between its claim and its settling.
      const settledRow = (externalId: string) => !['pending', 'answering'].includes(String(statusOf(externalId)));
      await fake.waitFor('the recovery', () => statusOf('Ev-recent') === 'answered' && settledRow('Ev-old'), 8_000);
      const statuses = db.prepare('SELECT external_id, status FROM channel_inbox ORDER BY external_id').all();
      expect(statuses).toEqual([
        { external_id: 'Ev-done', status: 'answered' },
        { external_id: 'Ev-old', status: 'expired' },
        { external_id: 'Ev-recent', status: 'answered' },
      ]);
      expect(fake.ok('chat.postMessage').filter((c) => [old, done].includes(String(c.body.thread_ts)))).toEqual([]);
      expect(fake.ok('chat.postMessage').filter((c) => c.body.thread_ts === recent)).toHaveLength(1);
    } finally {
      await second?.close();
      fs.rmSync(t.dataDir, { recursive: true, force: true });
      await fake.close();
    }
  });
});
