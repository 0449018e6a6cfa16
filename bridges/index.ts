/**
 * The platform bridges the channels service builds (DESIGN.md "Channels"): one factory per platform,
 * each importing its platform module when a channel of its type first starts (lazy.ts).
 */
import type { BridgeFactories } from '../src/business/channels/channels.service.js';
import { lazyBridge } from './lazy.js';

export const BRIDGE_FACTORIES: BridgeFactories = {
  slack: lazyBridge({
    load: async () => (await import('./slack/slack-bridge.js')).createSlackBridge,
    // Socket Mode with an app token; the Events API (deliveries to our route) otherwise.
    receivesHttp: (credentials) => !credentials.appToken,
  }),
  discord: lazyBridge({ load: async () => (await import('./discord/discord-bridge.js')).createDiscordBridge }),
};
