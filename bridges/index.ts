/** The platform bridges the channels service builds (DESIGN.md "Channels"): one factory per platform. */
import type { BridgeFactories } from '../src/business/channels/channels.service.js';
import { createDiscordBridge } from './discord/discord-bridge.js';
import { createSlackBridge } from './slack/slack-bridge.js';

export const BRIDGE_FACTORIES: BridgeFactories = { slack: createSlackBridge, discord: createDiscordBridge };
