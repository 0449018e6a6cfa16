/**
 * Builds the real Slack bridge against the fake Slack with a recording BridgeEvents, and delivers
 * signed Events API requests to it.
 */
import pino from 'pino';
import type { BridgeEvents, ChannelBridge, ChannelSettings, InboundMessage, InboundReaction, RawHttpResponse, SlackCredentials } from '../../bridges/bridge.js';
import { createSlackBridge } from '../../bridges/slack/slack-bridge.js';
import type { FakeSlack } from './slack-api.js';
import { signSlackCommand, signSlackRequest } from './slack-events.js';

export const BOT_TOKEN = 'xoxb-test-bot';
export const APP_TOKEN = 'xapp-test-app';
export const SIGNING_SECRET = 'test-signing-secret';

export interface Recorder {
  events: BridgeEvents;
  messages: InboundMessage[];
  reactions: InboundReaction[];
  statuses: Array<{ status: string; detail: string | null }>;
  /** While set, onMessage waits for this promise (to show the HTTP answer does not wait for the service). */
  hold: Promise<void> | null;
}

export function recorder(): Recorder {
  const rec: Recorder = {
    messages: [],
    reactions: [],
    statuses: [],
    hold: null,
    events: {
      async onMessage(message) {
        rec.messages.push(message);
        if (rec.hold) await rec.hold;
      },
      async onReaction(reaction) {
        rec.reactions.push(reaction);
      },
      onStatus(status, detail) {
        rec.statuses.push({ status, detail });
      },
    },
  };
  return rec;
}

export function defaultSettings(): ChannelSettings {
  return { respondTo: 'mentions', replyInThread: true, allowedConversations: [], enabled: true, streaming: true, feedbackButtons: true, statusMessages: [], suggestedPrompts: [] };
}

export interface Harness {
  bridge: ChannelBridge;
  rec: Recorder;
  settings: ChannelSettings;
}

export function makeBridge(fake: FakeSlack, credentials: Partial<SlackCredentials> = {}, mode: 'events' | 'socket' = 'events'): Harness {
  const rec = recorder();
  const settings = defaultSettings();
  const base: SlackCredentials = mode === 'events' ? { botToken: BOT_TOKEN, signingSecret: SIGNING_SECRET } : { botToken: BOT_TOKEN, appToken: APP_TOKEN };
  const bridge = createSlackBridge({
    channelId: 'ch_test',
    credentials: { ...base, ...credentials },
    settings: () => settings,
    apiUrl: fake.apiUrl,
    events: rec.events,
    logger: pino({ level: 'silent' }),
  });
  return { bridge, rec, settings };
}

export interface DeliverOptions {
  secret?: string;
  timestampSec?: number;
  headers?: Record<string, string>;
}

/** Signs and hands one Events API delivery to the bridge, as the lead's route does; a string is sent as the raw body. */
export function deliver(bridge: ChannelBridge, body: unknown, options: DeliverOptions = {}): Promise<RawHttpResponse> {
  if (!bridge.handleHttp) throw new Error('This bridge has no Events API endpoint.');
  const raw = typeof body === 'string' ? body : JSON.stringify(body);
  const headers = { ...signSlackRequest(raw, options.secret ?? SIGNING_SECRET, options.timestampSec), ...options.headers };
  return bridge.handleHttp({ rawBody: Buffer.from(raw), headers });
}

/** Signs and hands one slash command (`slashCommand()`'s form fields) to the bridge, as Slack posts it. */
export function deliverCommand(bridge: ChannelBridge, fields: Record<string, string>): Promise<RawHttpResponse> {
  if (!bridge.handleHttp) throw new Error('This bridge has no Events API endpoint.');
  const { body, headers } = signSlackCommand(fields, SIGNING_SECRET);
  return bridge.handleHttp({ rawBody: Buffer.from(body), headers });
}

/** Resolves once `check()` holds, or rejects after `timeoutMs`. */
export async function until(what: string, check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
