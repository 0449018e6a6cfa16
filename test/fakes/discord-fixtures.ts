/**
 * The fake Discord's world (see `discord-api.ts`): one bot, a few users, one guild with two text
 * channels and a thread, one DM channel — and the JSON payloads Discord's API v10 sends for them.
 */

export const FAKE_DISCORD_TOKEN = 'MTAwMDAwMDAwMDAwMDAwMDAx.fake.discord-bot-token';

export interface FakeUser {
  id: string;
  username: string;
  global_name: string | null;
  discriminator: string;
  avatar: null;
  bot?: boolean;
}

const user = (id: string, username: string, globalName: string | null, bot = false): FakeUser => ({
  id,
  username,
  global_name: globalName,
  discriminator: '0',
  avatar: null,
  ...(bot ? { bot: true } : {}),
});

export const BOT = user('100000000000000001', 'switchboard', 'Switchboard', true);
export const ALICE = user('100000000000000010', 'alice', 'Alice A.');
export const BOB = user('100000000000000011', 'bob', null);
export const OTHER_BOT = user('100000000000000012', 'otherbot', 'Other Bot', true);
export const USERS = [BOT, ALICE, BOB, OTHER_BOT];

export const GUILD_ID = '200000000000000001';
/** The bot's managed role (`tags.bot_id`): mentioning it addresses the bot. */
export const BOT_ROLE_ID = '200000000000000050';
export const MODS_ROLE_ID = '200000000000000051';
export const GENERAL_ID = '300000000000000001';
export const RANDOM_ID = '300000000000000002';
/** A public thread in #general. */
export const THREAD_ID = '300000000000000003';
/** Alice's DM channel with the bot. */
export const DM_ID = '300000000000000009';

const textChannel = (id: string, name: string, position: number) => ({ id, type: 0, name, position, topic: null, nsfw: false, parent_id: null, permission_overwrites: [], rate_limit_per_user: 0, last_message_id: null });

/** A public thread (type 11) in `parentId`. */
export const threadPayload = (id: string, parentId: string, name: string, ownerId = ALICE.id): Record<string, unknown> => ({
  id,
  type: 11,
  name,
  guild_id: GUILD_ID,
  parent_id: parentId,
  owner_id: ownerId,
  last_message_id: null,
  rate_limit_per_user: 0,
  message_count: 0,
  member_count: 2,
  thread_metadata: { archived: false, auto_archive_duration: 1440, archive_timestamp: '2024-01-01T00:00:00.000Z', locked: false },
  flags: 0,
});

/** The world's channels; a thread the bot starts is added (the fake's `POST …/threads`). */
export const CHANNELS: Record<string, Record<string, unknown>> = {
  [GENERAL_ID]: textChannel(GENERAL_ID, 'general', 0),
  [RANDOM_ID]: textChannel(RANDOM_ID, 'random', 1),
  [THREAD_ID]: threadPayload(THREAD_ID, GENERAL_ID, 'help-thread'),
  [DM_ID]: { id: DM_ID, type: 1, last_message_id: null, recipients: [ALICE], flags: 0 },
};

export const isGuildChannel = (id: string) => id !== DM_ID && id in CHANNELS;

const role = (id: string, name: string, position: number, tags?: Record<string, string>) => ({
  id,
  name,
  color: 0,
  hoist: false,
  icon: null,
  unicode_emoji: null,
  position,
  permissions: '1024',
  managed: tags !== undefined,
  mentionable: true,
  flags: 0,
  ...(tags ? { tags } : {}),
});

const member = (u: FakeUser, roles: string[]) => ({ user: u, nick: null, roles, joined_at: '2024-01-01T00:00:00.000Z', deaf: false, mute: false, flags: 0 });

/** GUILD_CREATE's `d`: the guild with its channels, thread, roles and members. */
export function guildCreate(): Record<string, unknown> {
  return {
    id: GUILD_ID,
    name: 'Fake Guild',
    icon: null,
    owner_id: ALICE.id,
    afk_timeout: 300,
    verification_level: 0,
    default_message_notifications: 0,
    explicit_content_filter: 0,
    features: [],
    mfa_level: 0,
    system_channel_id: null,
    premium_tier: 0,
    preferred_locale: 'en-US',
    nsfw_level: 0,
    roles: [role(GUILD_ID, '@everyone', 0), role(BOT_ROLE_ID, 'Switchboard', 1, { bot_id: BOT.id }), role(MODS_ROLE_ID, 'mods', 2)],
    emojis: [],
    stickers: [],
    joined_at: '2024-01-01T00:00:00.000Z',
    large: false,
    unavailable: false,
    member_count: 4,
    members: [member(BOT, [BOT_ROLE_ID, MODS_ROLE_ID]), member(ALICE, []), member(BOB, [MODS_ROLE_ID])],
    channels: [CHANNELS[GENERAL_ID], CHANNELS[RANDOM_ID]],
    threads: [CHANNELS[THREAD_ID]],
    presences: [],
    voice_states: [],
    stage_instances: [],
    guild_scheduled_events: [],
    soundboard_sounds: [],
  };
}

/** GET /channels/:id's answer. */
export function channelPayload(id: string): Record<string, unknown> | null {
  const channel = CHANNELS[id];
  if (!channel) return null;
  return isGuildChannel(id) ? { guild_id: GUILD_ID, ...channel } : channel;
}

let counter = 0;
/** A snowflake for "now" (Discord epoch 2015), unique within the process. */
export function snowflake(): string {
  counter = (counter + 1) % 4096;
  return (((BigInt(Date.now()) - 1420070400000n) << 22n) | BigInt(counter)).toString();
}

export interface MessageInput {
  channelId: string;
  author: FakeUser;
  content: string;
  id?: string;
  /** The message this one replies to (type 19), without pinging its author. */
  replyTo?: Record<string, unknown>;
  /** A system message type (e.g. 7, member join); default 0 (or 19 with `replyTo`). */
  type?: number;
  webhookId?: string;
}

/** A message object as Discord sends it: mentions resolved from `<@id>` / `<@&id>` in the content. */
export function messagePayload(input: MessageInput): Record<string, unknown> {
  const inGuild = isGuildChannel(input.channelId);
  const mentionedIds = [...input.content.matchAll(/<@!?(\d+)>/g)].map((m) => m[1]);
  const mentions = USERS.filter((u) => mentionedIds.includes(u.id));
  return {
    id: input.id ?? snowflake(),
    channel_id: input.channelId,
    ...(inGuild ? { guild_id: GUILD_ID, member: { roles: [], joined_at: '2024-01-01T00:00:00.000Z', deaf: false, mute: false, flags: 0 } } : {}),
    author: input.author,
    content: input.content,
    timestamp: new Date().toISOString(),
    edited_timestamp: null,
    tts: false,
    mention_everyone: /@(everyone|here)/.test(input.content),
    mentions,
    mention_roles: [...input.content.matchAll(/<@&(\d+)>/g)].map((m) => m[1]),
    attachments: [],
    embeds: [],
    pinned: false,
    type: input.type ?? (input.replyTo ? 19 : 0),
    flags: 0,
    ...(input.webhookId ? { webhook_id: input.webhookId } : {}),
    ...(inGuild ? {} : { channel_type: 1 }),
    ...(input.replyTo
      ? { message_reference: { type: 0, message_id: input.replyTo.id, channel_id: input.channelId, ...(inGuild ? { guild_id: GUILD_ID } : {}) }, referenced_message: input.replyTo }
      : {}),
  };
}
