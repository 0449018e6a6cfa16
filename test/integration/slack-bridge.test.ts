/**
 * The Slack bridge's Events API side: the real Bolt App behind the bridge's receiver, against the
 * fake Slack, deliveries signed as Slack signs them.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { InboundAction } from '../../bridges/bridge.js';
import { AppError, UnauthorizedError } from '../../src/errors.js';
import { startFakeSlack, type FakeSlack } from '../fakes/slack-api.js';
import { appMentionEvent, blockActions, eventCallback, messageEvent, nextTs, reactionEvent, signSlackRequest, slashCommand } from '../fakes/slack-events.js';
import { BOT_TOKEN, deliver, deliverCommand, makeBridge, until, type Harness } from '../fakes/slack-harness.js';

let fake: FakeSlack;
const started: Harness[] = [];

async function startBridge(): Promise<Harness> {
  const h = makeBridge(fake);
  started.push(h);
  await h.bridge.start();
  return h;
}

/** Delivers a plain (unmentioned) message as a marker and waits for it: everything sent before it has been handled. */
async function barrier(h: Harness, channel = 'C9'): Promise<void> {
  const before = h.rec.messages.length;
  const respondTo = h.settings.respondTo;
  h.settings.respondTo = 'all';
  const allowed = [...h.settings.allowedConversations];
  h.settings.allowedConversations = [];
  await deliver(h.bridge, eventCallback(messageEvent({ channel, text: 'barrier' })));
  await until('the barrier message', () => h.rec.messages.length > before && h.rec.messages.at(-1)?.text === 'barrier');
  h.rec.messages.pop();
  h.settings.respondTo = respondTo;
  h.settings.allowedConversations = allowed;
}

beforeAll(async () => {
  fake = await startFakeSlack({ botToken: BOT_TOKEN });
});
afterEach(async () => {
  for (const h of started.splice(0)) await h.bridge.stop();
  fake.reset();
});
afterAll(async () => {
  await fake.close();
});

describe('Slack bridge, Events API', () => {
  it('checks the bot token at start and reports connected', async () => {
    const h = await startBridge();
    expect(fake.ok('auth.test')).toHaveLength(1);
    expect(fake.ok('auth.test')[0]?.token).toBe(BOT_TOKEN);
    expect(h.rec.statuses).toEqual([{ status: 'connected', detail: null }]);
    await h.bridge.stop();
    await h.bridge.stop();
    await expect(deliver(h.bridge, eventCallback(messageEvent({ text: '<@UBOT> late' })))).rejects.toMatchObject({ code: 'unavailable', status: 503 });
    expect(h.rec.messages).toEqual([]);
  });

  it('reports a refused bot token with a readable detail and rejects start', async () => {
    const h = makeBridge(fake, { botToken: 'xoxb-wrong' });
    await expect(h.bridge.start()).rejects.toThrow('Slack rejected the bot token (invalid_auth)');
    expect(h.rec.statuses).toEqual([{ status: 'error', detail: 'Slack rejected the bot token (invalid_auth)' }]);
  });

  it('turns a mention (message + app_mention) into one InboundMessage, answered before the service finishes', async () => {
    const h = await startBridge();
    let release!: () => void;
    h.rec.hold = new Promise<void>((resolve) => (release = resolve));
    const ts = nextTs();
    const text = '<@UBOT> hi &amp; see <#C2|general>, <@U7|ann> and <https://example.com/a|the docs> &lt;3';
    const message = messageEvent({ channel: 'C1', user: 'U1', ts, text });
    // Answered while the service still holds the message (released below): the acknowledgement does not wait for it.
    const answer = await deliver(h.bridge, eventCallback(message, { eventId: 'EvMSG' }));
    expect(answer.status).toBe(200);
    await until('the message', () => h.rec.messages.length === 1);
    expect(h.rec.messages[0]).toEqual({
      externalId: 'EvMSG',
      conversationId: `C1:${ts}`,
      conversationRef: 'C1',
      userId: 'U1',
      text: 'hi & see #general, @ann and the docs (https://example.com/a) <3',
      direct: false,
      mentioned: true,
      replyTo: { channel: 'C1', thread_ts: ts, user: 'U1', team: 'T1' },
    });
    expect((await deliver(h.bridge, eventCallback(appMentionEvent(message), { eventId: 'EvMENTION' }))).status).toBe(200);
    release();
    h.rec.hold = null;
    await barrier(h);
    expect(h.rec.messages.map((m) => m.externalId)).toEqual(['EvMSG']);
  });

  it('keeps one message when app_mention arrives before message', async () => {
    const h = await startBridge();
    const message = messageEvent({ channel: 'C1', text: 'hello <@UBOT>' });
    await deliver(h.bridge, eventCallback(appMentionEvent(message), { eventId: 'EvA' }));
    await deliver(h.bridge, eventCallback(message, { eventId: 'EvB' }));
    await barrier(h);
    expect(h.rec.messages.map((m) => [m.externalId, m.text, m.mentioned])).toEqual([['EvA', 'hello', true]]);
  });

  it('puts a thread reply in the thread conversation, and a top-level message in the channel without replyInThread', async () => {
    const h = await startBridge();
    const ts = nextTs();
    await deliver(h.bridge, eventCallback(messageEvent({ channel: 'C1', text: '<@UBOT> in thread', thread_ts: '1700.000001', ts })));
    await until('the thread message', () => h.rec.messages.length === 1);
    expect(h.rec.messages[0]).toMatchObject({ conversationId: 'C1:1700.000001', replyTo: { channel: 'C1', thread_ts: '1700.000001' } });
    h.settings.replyInThread = false;
    await deliver(h.bridge, eventCallback(messageEvent({ channel: 'C1', text: '<@UBOT> top level' })));
    await until('the top-level message', () => h.rec.messages.length === 2);
    expect(h.rec.messages[1]).toMatchObject({ conversationId: 'C1', replyTo: { channel: 'C1', thread_ts: null } });
  });

  it('answers url_verification with its challenge', async () => {
    const h = await startBridge();
    const answer = await deliver(h.bridge, { token: 't', challenge: 'ch4ll3nge', type: 'url_verification' });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ challenge: 'ch4ll3nge' });
  });

  it('throws UnauthorizedError for a bad signature, a stale timestamp or missing headers', async () => {
    const h = await startBridge();
    const body = eventCallback(messageEvent({ text: '<@UBOT> forged' }));
    await expect(deliver(h.bridge, body, { secret: 'not-the-secret' })).rejects.toBeInstanceOf(UnauthorizedError);
    await expect(deliver(h.bridge, body, { timestampSec: Math.floor(Date.now() / 1000) - 301 })).rejects.toBeInstanceOf(UnauthorizedError);
    await expect(h.bridge.handleHttp!({ rawBody: Buffer.from(JSON.stringify(body)), headers: {} })).rejects.toBeInstanceOf(UnauthorizedError);
    const raw = JSON.stringify(body);
    const headers = signSlackRequest(raw, 'test-signing-secret');
    await expect(h.bridge.handleHttp!({ rawBody: Buffer.from(`${raw} `), headers })).rejects.toBeInstanceOf(UnauthorizedError);
    await barrier(h);
    expect(h.rec.messages).toEqual([]);
  });

  it('refuses a signed body that is no Slack delivery with a 400 naming the field, before Bolt', async () => {
    const h = await startBridge();
    h.settings.respondTo = 'all';
    const callback = eventCallback(messageEvent({ text: 'hello' }));
    const cases: Array<[body: unknown, code: string, path?: string]> = [
      [{ ...callback, event: null }, 'validation_failed', 'event'],
      [{ ...callback, event: 'a string' }, 'validation_failed', 'event'],
      [{ ...callback, event: 42 }, 'validation_failed', 'event'],
      [{ ...callback, event: { text: 'no type' } }, 'validation_failed', 'event.type'],
      [{ ...callback, event: { ...messageEvent({ text: 'x' }), channel: null } }, 'validation_failed', 'event.channel'],
      [{ ...callback, event: { ...messageEvent({ text: 'x' }), user: null } }, 'validation_failed', 'event.user'],
      [{ ...callback, event: { ...messageEvent({ text: 'x' }), text: 7 } }, 'validation_failed', 'event.text'],
      [{ ...callback, event: { type: 'reaction_added', user: 'U1', reaction: '+1', item: 'a string' } }, 'validation_failed', 'event.item'],
      [{ ...callback, authorizations: [null] }, 'validation_failed', 'authorizations.0'],
      [{ type: 'url_verification' }, 'validation_failed', 'challenge'],
      ['null', 'validation_failed', 'body'],
      ['[]', 'validation_failed', 'body'],
      ['"text"', 'validation_failed', 'body'],
      ['', 'validation_failed', 'type'],
      ['\0', 'invalid_json'],
      [`{"type":"event_callback","event":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`, 'validation_failed'],
    ];
    for (const [body, code, path] of cases) {
      const refusal = await deliver(h.bridge, body).then(
        (answer) => answer,
        (err: unknown) => err,
      );
      expect(refusal, JSON.stringify(body).slice(0, 200)).toBeInstanceOf(AppError);
      expect(refusal).toMatchObject({ code, status: 400 });
      if (path !== undefined) expect((refusal as AppError).errors?.[0]?.path).toBe(path);
    }
    // None reached a listener, and the bridge still answers the next well-formed delivery.
    await barrier(h);
    expect(h.rec.messages).toEqual([]);
    expect(h.rec.reactions).toEqual([]);
  });

  it('acknowledges well-formed deliveries it does not listen to, without Bolt', async () => {
    const h = await startBridge();
    const unknownEvent = await deliver(h.bridge, eventCallback({ type: 'team_rename', name: 'New name' }));
    expect(unknownEvent).toEqual({ status: 200, body: '' });
    const rateLimited = await deliver(h.bridge, { token: 't', team_id: 'T1', minute_rate_limited: 1518467820, api_app_id: 'AFAKE', type: 'app_rate_limited' });
    expect(rateLimited).toEqual({ status: 200, body: '' });
    // An interactivity payload (a form with JSON `payload`) other than a button click: nothing in the bridge listens to it.
    const payload = `payload=${encodeURIComponent(JSON.stringify({ type: 'view_submission', view: { id: 'V1' } }))}`;
    const action = await deliver(h.bridge, payload, { headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(action).toEqual({ status: 200, body: '' });
    const sslCheck = await deliver(h.bridge, 'ssl_check=1&token=t', { headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(sslCheck).toEqual({ status: 200, body: '' });
    await barrier(h);
    expect(h.rec.messages).toEqual([]);
  });

  it('hands a button click (block_actions) on with the clicked message’s thread, and refuses a click that names no user (400)', async () => {
    const h = await startBridge();
    const actions: InboundAction[] = [];
    h.rec.events.onAction = async (a) => void actions.push(a);
    const form = (payload: Record<string, unknown>) => deliver(h.bridge, `payload=${encodeURIComponent(JSON.stringify(payload))}`, { headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(await form(blockActions({ user: 'U9', actionId: 'handoff.accept', value: 'hnd_1', channel: 'CDESK', messageTs: '1.000100' }))).toEqual({ status: 200, body: '' });
    expect(await form(blockActions({ user: 'U9', actionId: 'handoff.return', value: 'hnd_1', channel: 'CDESK', messageTs: '1.000200', threadTs: '1.000100' }))).toEqual({ status: 200, body: '' });
    await until('both clicks', () => actions.length === 2);
    expect(actions).toEqual([
      {
        actionId: 'handoff.accept',
        value: 'hnd_1',
        userId: 'U9',
        conversationId: 'CDESK:1.000100',
        messageId: '1.000100',
        clickId: expect.any(String),
        replyTo: { channel: 'CDESK', thread_ts: '1.000100', user: 'U9', team: 'T1' },
      },
      expect.objectContaining({ actionId: 'handoff.return', value: 'hnd_1', userId: 'U9', conversationId: 'CDESK:1.000100', messageId: '1.000200' }),
    ]);
    const { user: _user, ...noUser } = blockActions({ user: 'U9', actionId: 'handoff.accept', value: 'hnd_1', channel: 'CDESK', messageTs: '1.000100' });
    await expect(form(noUser)).rejects.toMatchObject({ code: 'validation_failed', status: 400, errors: [expect.objectContaining({ path: 'payload.user' })] });
  });

  it('takes /human as a slash command: acknowledged at once, a thread started where it was typed, and the command its first message', async () => {
    const h = await startBridge();
    const command = slashCommand({ text: 'my refund <!channel> &amp; more', user: 'U5', channel: 'C1', responseUrl: fake.responseUrl });
    expect(await deliverCommand(h.bridge, command)).toEqual({ status: 200, body: '' });
    await until('the command', () => h.rec.messages.length === 1);
    const [root] = fake.ok('chat.postMessage');
    // The reason as plain text: what it pinged (`<!channel>`) pings nobody when the bot posts it.
    expect(root!.body).toMatchObject({ channel: 'C1', text: '<@U5> asked for a person: my refund @channel &amp; more' });
    expect(root!.body.thread_ts).toBeUndefined();
    const rootTs = String(root!.response!.ts);
    expect(h.rec.messages[0]).toEqual({
      externalId: `command:${command.trigger_id}`,
      conversationId: `C1:${rootTs}`,
      conversationRef: 'C1',
      userId: 'U5',
      text: '/human my refund @channel & more',
      direct: false,
      mentioned: true,
      replyTo: { channel: 'C1', thread_ts: rootTs, user: 'U5', team: 'T1' },
    });

    // Without replyInThread, as a top-level message: the channel's conversation, nothing posted first. In a DM: direct.
    h.settings.replyInThread = false;
    await deliverCommand(h.bridge, slashCommand({ channel: 'D7', channelName: 'directmessage', user: 'U5' }));
    await until('the second command', () => h.rec.messages.length === 2);
    expect(h.rec.messages[1]).toMatchObject({ conversationId: 'D7', text: '/human', direct: true, replyTo: { channel: 'D7', thread_ts: null } });
    expect(fake.ok('chat.postMessage')).toHaveLength(1);
  });

  it('answers a slash command it cannot take to the user alone, leaves other commands, and refuses a malformed one (400)', async () => {
    const h = await startBridge();
    h.settings.allowedConversations = ['C2'];
    const refused = await deliverCommand(h.bridge, slashCommand({ channel: 'C1' }));
    expect(refused.status).toBe(200);
    expect(JSON.parse(refused.body)).toEqual({ response_type: 'ephemeral', text: 'I do not answer in this conversation.' });
    h.settings.allowedConversations = [];
    // Slack will not let the bot post there (not a member): the user is told through the response_url.
    fake.failNext('chat.postMessage', 'not_in_channel');
    expect((await deliverCommand(h.bridge, slashCommand({ channel: 'C3', responseUrl: fake.responseUrl }))).status).toBe(200);
    await until('the answer to the user', () => fake.responses.length === 1);
    expect(fake.responses[0]).toMatchObject({ response_type: 'ephemeral', text: expect.stringContaining('(not_in_channel)') });
    expect(String(fake.responses[0]!.text)).toContain('<@UBOT> /human');
    expect(await deliverCommand(h.bridge, slashCommand({ command: '/weather', text: 'today' }))).toEqual({ status: 200, body: '' });
    const { user_id: _user, ...noUser } = slashCommand();
    await expect(deliverCommand(h.bridge, noUser)).rejects.toMatchObject({ code: 'validation_failed', status: 400, errors: [expect.objectContaining({ path: 'user_id' })] });
    await barrier(h);
    expect(h.rec.messages).toEqual([]);
  });

  it('delivers a retried event again with the same externalId (the service de-duplicates)', async () => {
    const h = await startBridge();
    const body = eventCallback(messageEvent({ text: '<@UBOT> once' }), { eventId: 'EvRETRY' });
    await deliver(h.bridge, body);
    const retry = await deliver(h.bridge, body, { headers: { 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_timeout' } });
    expect(retry.status).toBe(200);
    await until('both deliveries', () => h.rec.messages.length === 2);
    expect(h.rec.messages.map((m) => m.externalId)).toEqual(['EvRETRY', 'EvRETRY']);
  });

  it("ignores the bot's own messages, other bots, edits and deletions", async () => {
    const h = await startBridge();
    h.settings.respondTo = 'all';
    await deliver(h.bridge, eventCallback(messageEvent({ user: 'UBOT', text: 'my own answer' })));
    await deliver(h.bridge, eventCallback(messageEvent({ text: 'beep <@UBOT>', bot_id: 'BOTHER', subtype: 'bot_message' })));
    await deliver(h.bridge, eventCallback(messageEvent({ text: 'beep <@UBOT>', bot_id: 'BOTHER', user: 'UOTHERBOT' })));
    await deliver(h.bridge, eventCallback({ ...messageEvent({ text: '' }), subtype: 'message_changed', message: { text: '<@UBOT> edited', user: 'U1' } }));
    await deliver(h.bridge, eventCallback({ ...messageEvent({ text: '' }), subtype: 'message_deleted' }));
    await deliver(h.bridge, eventCallback(messageEvent({ text: 'a person' })));
    await until('the person', () => h.rec.messages.length >= 1);
    await barrier(h);
    expect(h.rec.messages.map((m) => m.text)).toEqual(['a person']);
  });

  it('delivers a thread reply the settings would not answer as unaddressed (a handoff desk’s member may have written it), and drops such a top-level message', async () => {
    const h = await startBridge();
    h.settings.allowedConversations = ['C1'];
    await deliver(h.bridge, eventCallback(messageEvent({ channel: 'C1', text: 'top level, no mention' })));
    await deliver(h.bridge, eventCallback(messageEvent({ channel: 'C1', text: 'in a thread, no mention', thread_ts: '1700.000009' })));
    await deliver(h.bridge, eventCallback(messageEvent({ channel: 'CDESK', text: '<@UBOT> another conversation', thread_ts: '1700.000010' })));
    await barrier(h);
    expect(h.rec.messages.map((m) => [m.text, m.addressed ?? true])).toEqual([
      ['in a thread, no mention', false],
      ['another conversation', false],
    ]);
  });

  it('applies respondTo, answers direct messages always, and filters allowedConversations — read live', async () => {
    const h = await startBridge();
    await deliver(h.bridge, eventCallback(messageEvent({ channel: 'C1', text: 'no mention' })));
    await deliver(h.bridge, eventCallback(messageEvent({ channel: 'D1', channel_type: 'im', text: 'a DM' })));
    await until('the DM', () => h.rec.messages.length === 1);
    expect(h.rec.messages[0]).toMatchObject({ text: 'a DM', direct: true, mentioned: false, conversationRef: 'D1' });

    h.settings.respondTo = 'all';
    await deliver(h.bridge, eventCallback(messageEvent({ channel: 'C1', text: 'everyone hears me' })));
    await until('the unmentioned message', () => h.rec.messages.length === 2);
    expect(h.rec.messages[1]).toMatchObject({ text: 'everyone hears me', mentioned: false, direct: false });

    h.settings.allowedConversations = ['C2'];
    await deliver(h.bridge, eventCallback(messageEvent({ channel: 'C1', text: '<@UBOT> not here' })));
    await deliver(h.bridge, eventCallback(messageEvent({ channel: 'C2', text: '<@UBOT> here' })));
    await barrier(h);
    expect(h.rec.messages.slice(2).map((m) => m.text)).toEqual(['here']);

    h.settings.allowedConversations = [];
    h.settings.enabled = false;
    await deliver(h.bridge, eventCallback(messageEvent({ channel: 'C1', text: '<@UBOT> disabled' })));
    h.settings.enabled = true;
    await barrier(h);
    expect(h.rec.messages).toHaveLength(3);
  });

  it('turns 👍 and 👎 on a message into ratings and ignores other reactions', async () => {
    const h = await startBridge();
    await deliver(h.bridge, eventCallback(reactionEvent({ reaction: '+1', ts: '1.1' })));
    await deliver(h.bridge, eventCallback(reactionEvent({ reaction: 'thumbsdown', ts: '1.2', user: 'U2' })));
    await deliver(h.bridge, eventCallback(reactionEvent({ reaction: 'tada', ts: '1.3' })));
    await deliver(h.bridge, eventCallback(reactionEvent({ reaction: '+1', ts: '1.4', itemType: 'file' })));
    await deliver(h.bridge, eventCallback(reactionEvent({ reaction: 'thumbsup::skin-tone-3', ts: '1.5' })));
    await deliver(h.bridge, eventCallback(reactionEvent({ reaction: '-1', ts: '1.6', itemUser: 'USOMEONE' })));
    await until('the reactions', () => h.rec.reactions.length >= 3);
    await barrier(h);
    expect(h.rec.reactions).toEqual([
      { messageExternalId: '1.1', userId: 'U1', rating: 5 },
      { messageExternalId: '1.2', userId: 'U2', rating: 1 },
      { messageExternalId: '1.5', userId: 'U1', rating: 5 },
    ]);
  });
});
