// API.md §9 end to end with the real discord.js: Switchboard's channels service, the Discord bridge
// and a fake Discord REST + gateway on 127.0.0.1. A mention is answered in place by the persona
// (typing first), a DM always, one session per Discord channel; 👍 becomes feedback.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeDiscord, startFakeDiscord } from '../fakes/discord-api.js';
import { waitFor } from '../fakes/discord-harness.js';
import { ALICE, BOB, BOT, DM_ID, FAKE_DISCORD_TOKEN, GENERAL_ID, GUILD_ID, OTHER_BOT, RANDOM_ID, THREAD_ID } from '../fakes/discord-fixtures.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createChannel, createPersona, createTeam } from '../helpers/factories.js';
import { REFUND_TEXT, seedSupport } from '../integration/chat-helpers.js';

describe('Discord channel end to end', { timeout: 30_000 }, () => {
  let fake: FakeDiscord;
  let t: TestApp;
  let channelId: string;
  let persona: string;

  const repliesTo = (messageId: string) => fake.posted.filter((p) => (p.body.message_reference as { message_id?: string } | undefined)?.message_id === messageId);
  const finalOf = (p: FakeDiscord['posted'][number]) => p.edits.at(-1)?.content ?? p.content;
  /** Whether a message is answered and settled (reply parts recorded, session stored). */
  const settled = (messageId: unknown) => t.ctx.sqlite().sqlite.prepare('SELECT status FROM channel_inbox WHERE external_id = ?').pluck().get(String(messageId)) === 'answered';

  beforeAll(async () => {
    fake = await startFakeDiscord();
    t = await createTestApp({ env: { SWITCHBOARD_DISCORD_API_URL: fake.apiUrl } });
    persona = await seedSupport(t);
    const channel = await createChannel(t, { type: 'discord', name: 'Support Discord', personaId: persona, credentials: { botToken: FAKE_DISCORD_TOKEN } });
    expect(channel.status).toBe('connected');
    channelId = channel.id;
  });
  afterAll(async () => {
    await t?.close();
    await fake?.close();
  });

  it('answers a mention in place, after showing typing, recorded as the channel’s session', async () => {
    const asked = fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: `<@${BOT.id}> How long do refunds take?` });
    const reply = await waitFor(() => settled(asked.id) && repliesTo(String(asked.id)).find((p) => finalOf(p).includes('5 business days')), 'the answer', 10_000);
    expect(finalOf(reply)).toContain(REFUND_TEXT.slice(0, 30));
    expect(reply.channelId).toBe(GENERAL_ID);
    expect(reply.body.allowed_mentions).toMatchObject({ parse: [] });
    expect(fake.requests.some((r) => r.route === 'POST /channels/:id/typing')).toBe(true);
    const sessions = (await t.request({ method: 'GET', url: `/sessions?channelId=${channelId}` })).json().data;
    expect(sessions).toHaveLength(1);
    expect(sessions[0]).toMatchObject({ channelId, userId: ALICE.id, personaId: persona });

    // The same Discord channel is the same conversation.
    const again = fake.userMessage({ channelId: GENERAL_ID, author: BOB, content: `<@${BOT.id}> and exceptions?` });
    await waitFor(() => settled(again.id) && repliesTo(String(again.id)).length > 0, 'the second answer', 10_000);
    const after = (await t.request({ method: 'GET', url: `/sessions?channelId=${channelId}` })).json().data;
    expect(after).toHaveLength(1);
  });

  it('answers a DM without a mention, ignores other bots and unmentioned channel chatter', async () => {
    const before = fake.posted.length;
    const bot = fake.userMessage({ channelId: GENERAL_ID, author: OTHER_BOT, content: `<@${BOT.id}> ping` });
    const chatter = fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: 'just chatting about refunds' });
    const dm = fake.userMessage({ channelId: DM_ID, author: BOB, content: 'refunds?' });
    await waitFor(() => fake.posted.some((p) => p.channelId === DM_ID), 'the DM answer', 10_000);
    // The gateway delivers in order and a message is stored before it is answered: once the DM is
    // answered, the two before it would be in the inbox had they been taken.
    const stored = (...ids: unknown[]) =>
      t.ctx.sqlite().sqlite.prepare(`SELECT count(*) FROM channel_inbox WHERE channel_id = ? AND external_id IN (${ids.map(() => '?').join(', ')})`).pluck().get(channelId, ...ids.map(String));
    expect(stored(dm.id)).toBe(1);
    expect(stored(bot.id, chatter.id)).toBe(0);
    expect(fake.posted.length - before).toBe(1);
    expect(repliesTo(String(dm.id))).toHaveLength(1);
  });

  it('turns 👍 on a reply into a 5-star rating of that answer', async () => {
    const asked = fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: `<@${BOT.id}> refunds again` });
    const reply = await waitFor(() => settled(asked.id) && repliesTo(String(asked.id)).find((p) => finalOf(p).includes('5 business days')), 'the answer', 10_000);
    fake.react({ user: ALICE, channelId: GENERAL_ID, messageId: reply.id, emoji: '👍' });
    const ratings = () =>
      t.ctx.sqlite().sqlite.prepare('SELECT f.rating FROM feedback f JOIN channel_messages m ON m.message_id = f.message_id WHERE m.external_id = ?').pluck().all(reply.id);
    await waitFor(() => ratings().length === 1, 'the feedback', 5_000);
    expect(ratings()).toEqual([5]);
  });

  it('sends to a channel: 202 with Discord’s message id as externalId, no pings allowed', async () => {
    const res = await t.request({ method: 'POST', url: `/business/channels/${channelId}/send`, body: { to: GENERAL_ID, message: 'Release notes are out @everyone' } });
    expect(res.statusCode, res.body).toBe(202);
    const sent = fake.posted.find((p) => p.id === res.json().externalId);
    expect(sent?.channelId).toBe(GENERAL_ID);
    expect(sent?.content).toContain('Release notes are out');
    expect(sent?.body.allowed_mentions).toMatchObject({ parse: [] });
  });
  it('works a handoff from Discord: the card with Accept in the team’s channel and a thread on it, a click accepts, the member’s thread messages reach the user, Hand back returns the conversation to the persona', async () => {
    const team = await createTeam(t, { name: 'Guild helpers', members: ['bob@example.com'] });
    const desk = await createPersona(t, { name: 'Guild desk', instructions: 'Answer questions about refunds.', teamId: team.id });
    await t.request({ method: 'POST', url: '/knowledge', body: { kind: 'text', name: 'Refunds', content: REFUND_TEXT, personaId: desk.id } });
    await t.ctx.services.knowledge.idle();
    expect((await t.request({ method: 'PUT', url: `/business/channels/${channelId}/settings`, body: { personaId: desk.id } })).statusCode).toBe(200);
    // A Discord desk works in threads of a server channel: `dm` is refused, naming the field.
    const dm = await t.request({ method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { desk: { channelId, conversation: 'dm' } } });
    expect(dm.statusCode).toBe(400);
    expect(dm.json().errors).toEqual([expect.objectContaining({ path: 'desk.conversation' })]);
    const set = await t.request({ method: 'PUT', url: `/business/teams/${team.id}/handoff`, body: { desk: { channelId, conversation: RANDOM_ID }, chatUsers: [{ email: 'bob@example.com', chatUserId: BOB.id }] } });
    expect(set.statusCode, set.body).toBe(200);

    const inThread = () => fake.posted.filter((p) => p.channelId === THREAD_ID).map((p) => finalOf(p));
    const asked = fake.userMessage({ channelId: THREAD_ID, author: ALICE, content: `<@${BOT.id}> /human my refund is late` });
    await waitFor(() => settled(asked.id) && inThread().some((x) => x.includes('passing this conversation to a person')), 'the hand-over notice', 10_000);
    await t.ctx.services.handoffs.deliver();
    const card = await waitFor(() => fake.posted.find((p) => p.channelId === RANDOM_ID && p.content.includes('my refund is late')), 'the card', 5_000);
    expect(card.body.components).toEqual([{ type: 1, components: [expect.objectContaining({ type: 2, style: 1, label: 'Accept', custom_id: expect.stringMatching(/^handoff\.accept:hnd_/) })] }]);
    // A thread started on the card (its id is the card's) is where the member works it.
    expect(fake.requests.some((r) => r.route === 'POST /channels/:id/messages/:id/threads' && r.path.includes(card.id))).toBe(true);
    const customId = (card.body.components as Array<{ components: Array<{ custom_id: string }> }>)[0]!.components[0]!.custom_id;
    const handoffId = customId.slice('handoff.accept:'.length);

    const clicked = fake.click({ user: BOB, messageId: card.id, customId });
    await waitFor(() => fake.callbacks.some((c) => c.interactionId === clicked && c.type === 6), 'the deferred update', 5_000);
    const inDesk = () => fake.posted.filter((p) => p.channelId === card.id).map((p) => p.content);
    await waitFor(() => inDesk().some((x) => x.startsWith(`<@${BOB.id}> (bob@example.com) accepted`)), 'the accepted line in the desk thread', 5_000);
    expect((await t.request({ method: 'GET', url: `/handoffs/${handoffId}` })).json()).toMatchObject({ status: 'accepted', member: 'bob@example.com' });
    await waitFor(() => inThread().includes('bob@example.com (a person) joined the conversation.'), 'the user told', 5_000);

    // Bob writes in the desk thread (no mention): it reaches the user in their thread.
    fake.userMessage({ channelId: card.id, author: BOB, content: 'Hi, Bob here: it left today.' });
    await waitFor(() => inThread().includes('Hi, Bob here: it left today.'), 'Bob’s reply to the user', 5_000);
    // Alice (no member) writes there too: ignored.
    fake.userMessage({ channelId: card.id, author: ALICE, content: 'me too' });
    // Bob hands back with the button under the accepted line.
    const accepted = fake.posted.find((p) => p.channelId === card.id && p.content.includes('accepted'))!;
    expect((accepted.body.components as Array<{ components: Array<{ label: string }> }>)[0]!.components.map((b) => b.label)).toEqual(['Hand back', 'Resolve']);
    fake.click({ user: BOB, messageId: accepted.id, customId: `handoff.return:${handoffId}` });
    await waitFor(() => inThread().includes('bob@example.com (a person) left the conversation; Guild desk takes over again.'), 'the hand-back notice', 5_000);
    await waitFor(() => inDesk().includes('bob@example.com handed the conversation back to Guild desk.'), 'the desk told', 5_000);
    expect(inThread()).not.toContain('me too');
    expect((await t.request({ method: 'GET', url: `/handoffs/${handoffId}` })).json().messages.filter((m: { author: string | null }) => m.author === 'human:bob@example.com').map((m: { content: string }) => m.content)).toEqual(['Hi, Bob here: it left today.']);

    // The persona answers the thread again.
    const again = fake.userMessage({ channelId: THREAD_ID, author: ALICE, content: `<@${BOT.id}> How long do refunds take?` });
    await waitFor(() => settled(again.id) && repliesTo(String(again.id)).some((p) => finalOf(p).includes('5 business days')), 'the persona’s answer', 10_000);
  });
  it('registers /ask in the server, shows it thinking, answers by editing the response with feedback buttons, opens a thread where follow-ups keep the session, and a click rates the answer once', async () => {
    await waitFor(() => fake.commands.find((c) => c.guildId === GUILD_ID), '/ask registered', 5_000);
    expect(fake.commands.find((c) => c.guildId === GUILD_ID)!.commands).toEqual([expect.objectContaining({ name: 'ask', type: 1, options: [expect.objectContaining({ name: 'question', type: 3, required: true })] })]);

    const id = fake.slash({ user: ALICE, channelId: GENERAL_ID, name: 'ask', options: { question: 'How long do refunds take?' } });
    await waitFor(() => fake.callbacks.some((c) => c.interactionId === id && c.type === 5), 'the deferred (thinking) response', 5_000);
    await waitFor(() => settled(id), 'the answer', 10_000);
    const answer = fake.posted.find((p) => p.edits.length > 0 && finalOf(p).includes('5 business days') && p.channelId === GENERAL_ID && p.body.content === undefined)!;
    expect(answer, 'the deferred response edited with the answer').toBeDefined();
    expect(answer.edits.at(-1)!.body.components).toEqual([
      { type: 1, components: [expect.objectContaining({ custom_id: 'switchboard.feedback:positive' }), expect.objectContaining({ custom_id: 'switchboard.feedback:negative' })] },
    ]);
    await waitFor(() => fake.requests.find((r) => r.route === 'POST /channels/:id/messages/:id/threads' && r.path.includes(answer.id)), 'the thread on the answer', 5_000);
    const [session] = (await t.request({ method: 'GET', url: `/sessions?channelId=${channelId}&userId=${ALICE.id}` })).json().data.filter((x: { title: string }) => x.title.startsWith('How long do refunds take'));
    expect(session).toBeDefined();

    // A follow-up in the thread (no mention needed: the bot opened it) continues the session.
    const follow = fake.userMessage({ channelId: answer.id, author: ALICE, content: 'And for exceptions?' });
    await waitFor(() => settled(follow.id) && repliesTo(String(follow.id)).length > 0, 'the follow-up answer', 10_000);
    expect((await t.request({ method: 'GET', url: `/sessions/${session.id}` })).json().messageCount).toBe(4);

    // 👍 under the answer: a 5, once per person (Bob's second click changes nothing; Alice's is her own).
    fake.click({ user: BOB, messageId: answer.id, customId: 'switchboard.feedback:positive' });
    fake.click({ user: BOB, messageId: answer.id, customId: 'switchboard.feedback:negative' });
    fake.click({ user: ALICE, messageId: answer.id, customId: 'switchboard.feedback:positive' });
    const ratings = () => t.ctx.sqlite().sqlite.prepare('SELECT f.rating FROM feedback f JOIN channel_messages m ON m.message_id = f.message_id WHERE m.external_id = ?').pluck().all(answer.id);
    await waitFor(() => ratings().length === 2, 'two ratings', 5_000);
    expect(ratings()).toEqual([5, 5]);
  });
});

