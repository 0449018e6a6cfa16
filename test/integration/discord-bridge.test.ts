/**
 * The Discord bridge's connection and inbound side: the real discord.js against the fake Discord
 * REST + gateway (test/fakes/discord-api.ts) speaking the v10 wire protocol.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ALICE, BOB, BOT, BOT_ROLE_ID, DM_ID, FAKE_DISCORD_TOKEN, GENERAL_ID, MODS_ROLE_ID, OTHER_BOT, RANDOM_ID, THREAD_ID } from '../fakes/discord-fixtures.js';
import { type Rig, sleep, startRig, waitFor } from '../fakes/discord-harness.js';

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** Sends a guild message that is always delivered, and waits for it: everything sent before it was processed. */
async function sentinel(r: Rig): Promise<void> {
  const before = r.rec.messages.length;
  const m = r.fake.userMessage({ channelId: RANDOM_ID, author: BOB, content: `<@${BOT.id}> sentinel` });
  await waitFor(() => r.rec.messages.some((x) => x.externalId === m.id), 'the sentinel message');
  expect(r.rec.messages.length).toBe(before + 1);
  r.rec.messages.pop();
}

// Guilds | GuildMessages | GuildMessageReactions | DirectMessages | DirectMessageReactions | MessageContent
const INTENTS = 1 + 512 + 1024 + 4096 + 8192 + 32768;

describe('Discord bridge: connection', () => {
  it('discovers the gateway from the REST base, identifies, and reports connected on READY', async () => {
    rig = await startRig({ fake: { heartbeatIntervalMs: 150 } });
    expect(rig.rec.statuses).toEqual([['connecting', null], ['connected', null]]);
    const gatewayBot = rig.fake.requests.find((r) => r.route === 'GET /gateway/bot');
    expect(gatewayBot?.headers.authorization).toBe(`Bot ${FAKE_DISCORD_TOKEN}`);
    const [conn] = rig.fake.gateway.connections;
    expect(conn?.query.toString()).toBe('v=10&encoding=json'); // no zlib-stream compression
    const identify = rig.fake.gateway.received(2)[0]!.d as { token: string; intents: number; compress: boolean; shard: number[] };
    expect(identify).toMatchObject({ token: FAKE_DISCORD_TOKEN, intents: INTENTS, compress: false, shard: [0, 1] });
    // Heartbeats go out and are acknowledged; the connection stays up.
    await waitFor(() => rig!.fake.gateway.received(1).length >= 3, 'three heartbeats');
    expect(rig.fake.gateway.frames.filter((f) => f.dir === 'out' && f.op === 11).length).toBeGreaterThanOrEqual(2);
    expect(rig.fake.gateway.connections).toHaveLength(1);
  });

  it('a token refused by REST (401) → status error with a readable reason, and start() rejects', async () => {
    const err = await startRig({ token: 'not-the-token' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe('Discord rejected the bot token (401 Unauthorized).');
    expect((err as Error).message).not.toContain('not-the-token');
  });

  it('a token refused by the gateway (close 4004) → status error, start() rejects, no reconnect', async () => {
    rig = await startRig({ noStart: true, fake: { restToken: 'rest-ok-token' }, token: 'rest-ok-token' });
    await expect(rig.bridge.start()).rejects.toThrow('Discord rejected the bot token (gateway close 4004: authentication failed).');
    expect(rig.rec.statuses).toEqual([
      ['connecting', null],
      ['error', 'Discord rejected the bot token (gateway close 4004: authentication failed).'],
    ]);
    await waitFor(() => rig!.fake.gateway.connections[0]?.closeCode === 4004, 'the 4004 close');
    await sleep(800);
    expect(rig.fake.gateway.connections).toHaveLength(1);
  });

  it('start() can be retried after a failure (the service retries the same bridge)', async () => {
    rig = await startRig({ noStart: true, fake: { restToken: 'other' } });
    await expect(rig.bridge.start()).rejects.toThrow(/401/);
    rig.fake.set({ restToken: null });
    await rig.bridge.start();
    expect(rig.rec.statuses.at(-1)).toEqual(['connected', null]);
  });

  it('op 7 RECONNECT → resumes the session (RESUME, not IDENTIFY) and later messages still arrive', async () => {
    rig = await startRig();
    const gw = rig.fake.gateway;
    gw.reconnect();
    await waitFor(() => gw.received(6).length === 1 && gw.current?.live, 'a resumed connection');
    const resume = gw.received(6)[0]!.d as { session_id: string; seq: number };
    expect(resume.session_id).toBe('fake-session-1');
    expect(resume.seq).toBe(2); // READY, GUILD_CREATE
    expect(gw.received(2)).toHaveLength(1);
    await waitFor(() => rig!.rec.statuses.at(-1)?.[0] === 'connected' && rig!.rec.statuses.length === 4, 'connected again');
    expect(rig.rec.statuses.slice(2)).toEqual([
      ['connecting', 'The Discord gateway connection dropped; reconnecting.'],
      ['connected', null],
    ]);
    const m = rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: `<@${BOT.id}> after reconnect` });
    await waitFor(() => rig!.rec.messages.find((x) => x.externalId === m.id), 'the message after reconnect');
  });

  it('a dropped socket → reconnects and resumes; events sent meanwhile are replayed once', async () => {
    rig = await startRig();
    const gw = rig.fake.gateway;
    gw.drop();
    const missed = rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: `<@${BOT.id}> while you were away` });
    await waitFor(() => gw.connections.length === 2 && gw.current?.live, 'a second, resumed connection', 8000);
    expect(gw.received(6)).toHaveLength(1);
    await waitFor(() => rig!.rec.messages.find((x) => x.externalId === missed.id), 'the replayed message');
    const later = rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: `<@${BOT.id}> later` });
    await waitFor(() => rig!.rec.messages.find((x) => x.externalId === later.id), 'a later message');
    expect(rig.rec.messages.map((x) => x.externalId)).toEqual([missed.id, later.id]);
    expect(rig.rec.statuses.at(-1)).toEqual(['connected', null]);
  });

  it('stop() closes the gateway connection and nothing reconnects; stop twice is fine', async () => {
    rig = await startRig({ fake: { heartbeatIntervalMs: 100 } });
    await rig.bridge.stop();
    await waitFor(() => rig!.fake.gateway.connections[0]?.closeCode === 1000, 'a normal close');
    const frames = rig.fake.gateway.frames.length;
    await sleep(700);
    expect(rig.fake.gateway.connections).toHaveLength(1);
    expect(rig.fake.gateway.frames.length).toBe(frames); // no heartbeat after stop
    await rig.bridge.stop();
  });
  it('stop() during a gateway outage ends the reconnect loop: no more attempts, no socket or timer left', async () => {
    const count = (kinds: string[]) => process.getActiveResourcesInfo().filter((k) => kinds.includes(k)).length;
    const timersBefore = count(['Timeout']);
    rig = await startRig({ fake: { heartbeatIntervalMs: 100 } });
    rig.fake.set({ acceptConnections: false });
    rig.fake.gateway.drop();
    await waitFor(() => rig!.fake.gateway.connections.length >= 3, 'reconnect attempts');
    await rig.bridge.stop();
    const attempts = rig.fake.gateway.connections.length;
    await sleep(1500);
    expect(rig.fake.gateway.connections.length).toBe(attempts);
    await rig.close();
    rig = undefined;
    await sleep(50);
    expect(count(['TCPSocketWrap', 'TCPServerWrap'])).toBe(0);
    expect(count(['Timeout'])).toBeLessThanOrEqual(timersBefore);
  });
});

describe('Discord bridge: inbound messages', () => {
  it('a mention → one InboundMessage: the mention removed, markup readable, ids right', async () => {
    rig = await startRig();
    const m = rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: `<@!${BOT.id}>, ask <@${BOB.id}> and <@&${MODS_ROLE_ID}> in <#${RANDOM_ID}> <:party:123456789012345678>` });
    const got = await waitFor(() => rig!.rec.messages[0], 'the message');
    expect(got).toEqual({
      externalId: m.id,
      conversationId: GENERAL_ID,
      conversationRef: GENERAL_ID,
      userId: ALICE.id,
      text: 'ask @bob and @mods in #random :party:',
      direct: false,
      mentioned: true,
      replyTo: { channelId: GENERAL_ID, messageId: m.id },
    });
    await sentinel(rig);
    expect(rig.rec.messages).toHaveLength(1);
  });

  it('respondTo "mentions" ignores unaddressed guild messages; "all" takes them; settings are read live', async () => {
    rig = await startRig();
    rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: 'just chatting' });
    rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: '@everyone look' });
    await sentinel(rig);
    expect(rig.rec.messages).toEqual([]);
    rig.settings = { ...rig.settings, respondTo: 'all', replyInThread: false };
    const m = rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: 'now you hear me' });
    const got = await waitFor(() => rig!.rec.messages[0], 'the message under respondTo all');
    expect(got).toMatchObject({ externalId: m.id, text: 'now you hear me', mentioned: false, replyTo: { channelId: GENERAL_ID, messageId: null } });
  });

  it('a mention of the bot\'s managed role, or a reply to the bot (without ping), addresses it', async () => {
    rig = await startRig();
    const role = rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: `<@&${BOT_ROLE_ID}> what now?` });
    await waitFor(() => rig!.rec.messages[0], 'the role mention');
    expect(rig.rec.messages[0]).toMatchObject({ externalId: role.id, text: 'what now?', mentioned: true });
    const answer = rig.fake.userMessage({ channelId: GENERAL_ID, author: BOT, content: 'an answer' });
    const reply = rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: 'and then?', replyTo: answer });
    await waitFor(() => rig!.rec.messages[1], 'the reply');
    expect(rig.rec.messages[1]).toMatchObject({ externalId: reply.id, text: 'and then?', mentioned: true });
  });

  it('a DM without a mention is delivered (direct), even outside allowedConversations', async () => {
    rig = await startRig({ settings: { allowedConversations: [RANDOM_ID] } });
    const m = rig.fake.userMessage({ channelId: DM_ID, author: ALICE, content: 'hello bot' });
    const got = await waitFor(() => rig!.rec.messages[0], 'the DM');
    expect(got).toEqual({
      externalId: m.id,
      conversationId: DM_ID,
      conversationRef: DM_ID,
      userId: ALICE.id,
      text: 'hello bot',
      direct: true,
      mentioned: false,
      replyTo: { channelId: DM_ID, messageId: m.id },
    });
  });

  it('ignores other bots, webhooks, system messages, the bot itself, bare mentions and a disabled channel', async () => {
    rig = await startRig({ settings: { respondTo: 'all' } });
    rig.fake.userMessage({ channelId: GENERAL_ID, author: OTHER_BOT, content: `<@${BOT.id}> beep` });
    rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: `<@${BOT.id}> via hook`, webhookId: '555555555555555555' });
    rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: '', type: 7 });
    rig.fake.userMessage({ channelId: GENERAL_ID, author: BOT, content: 'my own words' });
    rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: `<@${BOT.id}>` });
    await sentinel(rig);
    expect(rig.rec.messages).toEqual([]);
    rig.settings = { ...rig.settings, enabled: false };
    const reads = rig.settingsReads;
    rig.fake.userMessage({ channelId: DM_ID, author: ALICE, content: 'anyone?' });
    // Settings are read when the event arrives: keep them disabled until the DM has read them.
    await waitFor(() => rig!.settingsReads > reads, 'the DM event');
    rig.settings = { ...rig.settings, enabled: true };
    await sentinel(rig);
    expect(rig.rec.messages).toEqual([]);
  });

  it('allowedConversations: a channel id, or a thread\'s parent; a thread is its own conversation', async () => {
    rig = await startRig({ settings: { allowedConversations: [RANDOM_ID] } });
    rig.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: `<@${BOT.id}> in general` });
    // A thread message outside them is delivered unaddressed (a handoff desk's member may have written it); the service drops it otherwise.
    const outside = rig.fake.userMessage({ channelId: THREAD_ID, author: ALICE, content: `<@${BOT.id}> in the thread` });
    await waitFor(() => rig!.rec.messages.some((x) => x.externalId === outside.id), 'the unaddressed thread message');
    await sentinel(rig);
    expect(rig.rec.messages).toEqual([expect.objectContaining({ externalId: outside.id, addressed: false })]);
    rig.settings = { ...rig.settings, allowedConversations: [GENERAL_ID] };
    const m = rig.fake.userMessage({ channelId: THREAD_ID, author: ALICE, content: `<@${BOT.id}> in the thread again` });
    const got = await waitFor(() => rig!.rec.messages[1], 'the thread message');
    expect(got.addressed).toBeUndefined();
    expect(got).toMatchObject({ externalId: m.id, conversationId: THREAD_ID, conversationRef: GENERAL_ID, replyTo: { channelId: THREAD_ID, messageId: m.id } });
  });
});

describe('Discord bridge: reactions', () => {
  it('👍 → 5 and 👎 → 1 (any skin tone, uncached messages and DM channels too); other emoji and bots are ignored', async () => {
    rig = await startRig();
    const answer = rig.fake.userMessage({ channelId: GENERAL_ID, author: BOT, content: 'an answer' });
    const uncached = '1234567890123456789';
    rig.fake.react({ user: ALICE, channelId: GENERAL_ID, messageId: answer.id as string, emoji: '❤️' });
    rig.fake.react({ user: OTHER_BOT, channelId: GENERAL_ID, messageId: answer.id as string, emoji: '👍' });
    rig.fake.react({ user: BOT, channelId: GENERAL_ID, messageId: answer.id as string, emoji: '👍' });
    rig.fake.react({ user: ALICE, channelId: GENERAL_ID, messageId: answer.id as string, emoji: '👍' });
    rig.fake.react({ user: BOB, channelId: GENERAL_ID, messageId: uncached, emoji: '👎🏽' });
    rig.fake.react({ user: ALICE, channelId: DM_ID, messageId: '1234567890123456790', emoji: '👎' });
    await waitFor(() => rig!.rec.reactions.length >= 3, 'three reactions');
    await sentinel(rig);
    expect(rig.rec.reactions).toEqual([
      { messageExternalId: answer.id, userId: ALICE.id, rating: 5 },
      { messageExternalId: uncached, userId: BOB.id, rating: 1 },
      { messageExternalId: '1234567890123456790', userId: ALICE.id, rating: 1 },
    ]);
  });
});
