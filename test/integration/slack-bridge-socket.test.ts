/**
 * The Slack bridge in Socket Mode: Bolt's Socket Mode client against the fake's WebSocket endpoint
 * (URL from the fake's apps.connections.open), envelopes acked and delivered, reconnects reported.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeSlack, type FakeSlack } from '../fakes/slack-api.js';
import { eventCallback, messageEvent, slashCommand } from '../fakes/slack-events.js';
import { APP_TOKEN, BOT_TOKEN, makeBridge, until, type Harness } from '../fakes/slack-harness.js';

let fake: FakeSlack;
let h: Harness | null = null;

beforeAll(async () => {
  fake = await startFakeSlack({ botToken: BOT_TOKEN, appToken: APP_TOKEN });
});
afterEach(async () => {
  await h?.bridge.stop();
  h = null;
  await fake.waitFor('the socket to close', () => fake.socket.open === 0, 3000);
  fake.reset();
});
afterAll(async () => {
  await fake.close();
});

async function startSocketBridge(): Promise<Harness> {
  const harness = makeBridge(fake, {}, 'socket');
  h = harness;
  await harness.bridge.start();
  return harness;
}

describe('Slack bridge, Socket Mode', () => {
  it('connects through apps.connections.open and reports connecting then connected', async () => {
    const before = fake.socket.connections;
    const harness = await startSocketBridge();
    expect(harness.bridge.handleHttp).toBeUndefined();
    expect(fake.ok('auth.test')[0]?.token).toBe(BOT_TOKEN);
    expect(fake.ok('apps.connections.open')[0]?.token).toBe(APP_TOKEN);
    expect(fake.socket.connections).toBe(before + 1);
    expect(harness.rec.statuses).toEqual([
      { status: 'connecting', detail: null },
      { status: 'connected', detail: null },
    ]);
  });

  it('acks an events_api envelope and delivers its message', async () => {
    const harness = await startSocketBridge();
    const envelope = fake.socket.push(eventCallback(messageEvent({ channel: 'C1', text: '<@UBOT> over the socket' }), { eventId: 'EvSOCK' }));
    await fake.waitFor('the ack', () => fake.socket.acks.some((a) => a.envelope_id === envelope));
    await until('the message', () => harness.rec.messages.length === 1);
    expect(harness.rec.messages[0]).toMatchObject({ externalId: 'EvSOCK', text: 'over the socket', conversationRef: 'C1', mentioned: true });
  });

  it('acks a slash_commands envelope and delivers /human as the first message of a thread it starts', async () => {
    const harness = await startSocketBridge();
    const command = slashCommand({ text: 'please', user: 'U6', channel: 'C1' });
    const envelope = fake.socket.pushCommand(command);
    await fake.waitFor('the ack', () => fake.socket.acks.some((a) => a.envelope_id === envelope));
    await until('the command', () => harness.rec.messages.length === 1);
    const rootTs = String(fake.ok('chat.postMessage')[0]!.response!.ts);
    expect(harness.rec.messages[0]).toMatchObject({ externalId: `command:${command.trigger_id}`, conversationId: `C1:${rootTs}`, text: '/human please', userId: 'U6', mentioned: true });
  });

  it('reconnects after the connection drops and after a disconnect message, reporting status', async () => {
    const harness = await startSocketBridge();
    const base = fake.socket.connections;
    harness.rec.statuses.length = 0;

    fake.socket.drop();
    await fake.waitFor('a new connection', () => fake.socket.connections === base + 1 && fake.socket.open === 1, 8000);
    await until('connected again', () => harness.rec.statuses.at(-1)?.status === 'connected');
    expect(harness.rec.statuses[0]).toMatchObject({ status: 'connecting' });
    expect(harness.rec.statuses[0]?.detail).toMatch(/closed; reconnecting/);

    const envelope = fake.socket.push(eventCallback(messageEvent({ channel: 'C1', text: '<@UBOT> after the drop' })));
    await fake.waitFor('the ack after reconnect', () => fake.socket.acks.some((a) => a.envelope_id === envelope));
    await until('the message after reconnect', () => harness.rec.messages.some((m) => m.text === 'after the drop'));

    harness.rec.statuses.length = 0;
    fake.socket.sendDisconnect('refresh_requested');
    await fake.waitFor('another connection', () => fake.socket.connections === base + 2 && fake.socket.open === 1, 8000);
    await until('connected once more', () => harness.rec.statuses.at(-1)?.status === 'connected');
    const again = fake.socket.push(eventCallback(messageEvent({ channel: 'C1', text: '<@UBOT> after the refresh' })));
    await fake.waitFor('the ack after refresh', () => fake.socket.acks.some((a) => a.envelope_id === again));
    await until('the message after refresh', () => harness.rec.messages.some((m) => m.text === 'after the refresh'));
  });

  it('backs off when reconnecting fails, then connects', async () => {
    const harness = await startSocketBridge();
    harness.rec.statuses.length = 0;
    const base = fake.socket.connections;
    fake.reset();
    fake.failNext('apps.connections.open', 'internal_error');
    fake.socket.drop();
    await fake.waitFor('the reconnection', () => fake.socket.connections === base + 1 && fake.socket.open === 1, 8000);
    await until('connected again', () => harness.rec.statuses.at(-1)?.status === 'connected');
    const opens = fake.calls.filter((c) => c.method === 'apps.connections.open');
    expect(opens.map((c) => c.error)).toEqual(['internal_error', null]);
    expect((opens[1]?.at ?? 0) - (opens[0]?.at ?? 0)).toBeGreaterThanOrEqual(400);
    expect(harness.rec.statuses.some((s) => s.status === 'connecting' && /Next attempt in 0\.5 s/.test(s.detail ?? ''))).toBe(true);
  });

  it('reports a refused app token and rejects start', async () => {
    const harness = makeBridge(fake, { appToken: 'xapp-wrong' }, 'socket');
    h = harness;
    await expect(harness.bridge.start()).rejects.toThrow('Slack rejected the app token (invalid_auth)');
    expect(harness.rec.statuses.at(-1)).toEqual({ status: 'error', detail: 'Slack rejected the app token (invalid_auth)' });
  });
});
