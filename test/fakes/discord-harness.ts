/**
 * Test harness for the Discord bridge: the fake Discord, the real bridge (real discord.js) on it,
 * and a recording `BridgeEvents`. Every wait is bounded.
 */
import pino from 'pino';
import type { BridgeEvents, ChannelBridge, ChannelSettings, InboundMessage, InboundReaction } from '../../bridges/bridge.js';
import { createDiscordBridgeWith, DEFAULT_DISCORD_TUNING, type DiscordTuning } from '../../bridges/discord/discord-bridge.js';
import { type FakeDiscord, type FakeDiscordSettings, startFakeDiscord } from './discord-api.js';
import { FAKE_DISCORD_TOKEN } from './discord-fixtures.js';

export interface Recorded {
  messages: InboundMessage[];
  reactions: InboundReaction[];
  statuses: Array<[status: string, detail: string | null]>;
  events: BridgeEvents;
}

export function recorder(): Recorded {
  const rec: Recorded = {
    messages: [],
    reactions: [],
    statuses: [],
    events: {
      onMessage: async (m) => void rec.messages.push(m),
      onReaction: async (r) => void rec.reactions.push(r),
      onStatus: (status, detail) => void rec.statuses.push([status, detail]),
    },
  };
  return rec;
}

/** Polls `probe` every 10 ms until it answers something truthy; fails after `ms`. */
export async function waitFor<T>(probe: () => T | null | undefined | false, what: string, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`Timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const defaultSettings = (): ChannelSettings => ({ respondTo: 'mentions', replyInThread: true, allowedConversations: [], enabled: true, streaming: true, feedbackButtons: true, statusMessages: [], suggestedPrompts: [] });

export interface Rig {
  fake: FakeDiscord;
  rec: Recorded;
  settings: ChannelSettings;
  /** How many times the bridge has read the settings (once per message event it handles). */
  settingsReads: number;
  bridge: ChannelBridge;
  /** Stops the bridge and the fake. */
  close(): Promise<void>;
}

export interface RigOptions {
  fake?: Partial<FakeDiscordSettings>;
  tuning?: Partial<DiscordTuning>;
  token?: string;
  settings?: Partial<ChannelSettings>;
  /** Do not start the bridge. */
  noStart?: boolean;
}

export async function startRig(options: RigOptions = {}): Promise<Rig> {
  const fake = await startFakeDiscord(options.fake);
  const rec = recorder();
  const rig: Rig = {
    fake,
    rec,
    settings: { ...defaultSettings(), ...options.settings },
    settingsReads: 0,
    bridge: createDiscordBridgeWith(
      {
        channelId: 'chn_discord_test',
        credentials: { botToken: options.token ?? FAKE_DISCORD_TOKEN },
        settings: () => {
          rig.settingsReads++;
          return rig.settings;
        },
        apiUrl: fake.apiUrl,
        events: rec.events,
        logger: pino({ level: 'silent' }),
      },
      { ...DEFAULT_DISCORD_TUNING, loginTimeoutMs: 10_000, ...options.tuning },
    ),
    async close() {
      await rig.bridge.stop();
      await fake.close();
    },
  };
  if (!options.noStart) {
    try {
      await rig.bridge.start();
    } catch (err) {
      await rig.close();
      throw err;
    }
  }
  return rig;
}
