/**
 * Slack Events API payloads and signatures for tests: event callbacks as Slack sends them (to the
 * Events API endpoint or inside a Socket Mode envelope) and the `X-Slack-Signature` headers.
 */
import { createHmac } from 'node:crypto';

let counter = 0;

/** A unique message ts, as Slack writes them. */
export function nextTs(): string {
  counter += 1;
  return `${1_800_000_000 + counter}.${String(counter).padStart(6, '0')}`;
}

export interface CallbackOptions {
  eventId?: string;
  teamId?: string;
  botUserId?: string;
}

/** Wraps an event in an `event_callback` body. */
export function eventCallback(event: Record<string, unknown>, options: CallbackOptions = {}): Record<string, unknown> {
  counter += 1;
  const teamId = options.teamId ?? 'T1';
  return {
    token: 'verification-token',
    team_id: teamId,
    api_app_id: 'AFAKE',
    event: { event_ts: event.ts ?? nextTs(), ...event },
    type: 'event_callback',
    event_id: options.eventId ?? `Ev${String(counter).padStart(8, '0')}`,
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ enterprise_id: null, team_id: teamId, user_id: options.botUserId ?? 'UBOT', is_bot: true, is_enterprise_install: false }],
    is_ext_shared_channel: false,
  };
}

export interface MessageFields {
  channel?: string;
  user?: string;
  text: string;
  ts?: string;
  thread_ts?: string;
  channel_type?: 'channel' | 'group' | 'im' | 'mpim';
  subtype?: string;
  bot_id?: string;
}

/** A `message` event (a channel by default). */
export function messageEvent(fields: MessageFields): Record<string, unknown> {
  return { type: 'message', channel: 'C1', user: 'U1', ts: nextTs(), channel_type: 'channel', ...fields };
}

/** The `app_mention` Slack sends alongside `message` when the bot is mentioned in a channel. */
export function appMentionEvent(message: Record<string, unknown>): Record<string, unknown> {
  const { channel_type: _type, ...rest } = message;
  return { ...rest, type: 'app_mention' };
}

export function reactionEvent(fields: { user?: string; reaction: string; ts: string; channel?: string; itemUser?: string; itemType?: string }): Record<string, unknown> {
  return {
    type: 'reaction_added',
    user: fields.user ?? 'U1',
    reaction: fields.reaction,
    item_user: fields.itemUser ?? 'UBOT',
    item: { type: fields.itemType ?? 'message', channel: fields.channel ?? 'C1', ts: fields.ts },
    event_ts: nextTs(),
  };
}

/** The headers Slack signs a delivery with: HMAC-SHA256 of `v0:<ts>:<body>` under the signing secret. */
export function signSlackRequest(body: string, signingSecret: string, timestampSec = Math.floor(Date.now() / 1000)): Record<string, string> {
  const signature = createHmac('sha256', signingSecret).update(`v0:${timestampSec}:${body}`).digest('hex');
  return {
    'content-type': 'application/json',
    'x-slack-signature': `v0=${signature}`,
    'x-slack-request-timestamp': String(timestampSec),
  };
}

/**
 * A `block_actions` interaction as Slack posts it when a user clicks a button of a message: a form
 * with a JSON `payload` (send it with `signSlackForm`).
 */
export function blockActions(fields: { user: string; actionId: string; value: string; channel: string; messageTs: string; threadTs?: string }): Record<string, unknown> {
  counter += 1;
  return {
    type: 'block_actions',
    user: { id: fields.user, username: fields.user.toLowerCase(), team_id: 'T1' },
    api_app_id: 'AFAKE',
    token: 'verification-token',
    container: { type: 'message', message_ts: fields.messageTs, channel_id: fields.channel, is_ephemeral: false, ...(fields.threadTs ? { thread_ts: fields.threadTs } : {}) },
    trigger_id: `trigger-${counter}`,
    team: { id: 'T1', domain: 'fake' },
    channel: { id: fields.channel, name: 'desk' },
    message: { type: 'message', ts: fields.messageTs, ...(fields.threadTs ? { thread_ts: fields.threadTs } : {}), text: 'card', bot_id: 'BBOT' },
    response_url: 'http://127.0.0.1:9/response',
    actions: [{ type: 'button', action_id: fields.actionId, block_id: 'b1', value: fields.value, action_ts: String(Date.now() / 1000) }],
  };
}

/** An interactivity delivery's raw body and signed headers (form-encoded `payload`). */
export function signSlackForm(payload: Record<string, unknown>, signingSecret: string): { body: string; headers: Record<string, string> } {
  const body = new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
  return { body, headers: { ...signSlackRequest(body, signingSecret), 'content-type': 'application/x-www-form-urlencoded' } };
}

export interface SlashCommandFields {
  command?: string;
  text?: string;
  user?: string;
  channel?: string;
  /** A channel's name, `directmessage` for a DM. */
  channelName?: string;
  team?: string;
  /** Where the app may answer the user later (the fake Slack's `responseUrl`). */
  responseUrl?: string;
}

/**
 * A slash command as Slack sends it: plain form fields (POSTed to the request URL, or the payload
 * of a Socket Mode `slash_commands` envelope). No thread: Slack allows none in threads.
 */
export function slashCommand(fields: SlashCommandFields = {}): Record<string, string> {
  counter += 1;
  const team = fields.team ?? 'T1';
  const user = fields.user ?? 'U1';
  return {
    token: 'verification-token',
    team_id: team,
    team_domain: 'fake',
    channel_id: fields.channel ?? 'C1',
    channel_name: fields.channelName ?? 'general',
    user_id: user,
    user_name: user.toLowerCase(),
    command: fields.command ?? '/human',
    text: fields.text ?? '',
    api_app_id: 'AFAKE',
    is_enterprise_install: 'false',
    response_url: fields.responseUrl ?? 'http://127.0.0.1:9/response',
    trigger_id: `${counter}.${String(counter).padStart(6, '0')}.trigger`,
  };
}

/** A slash command's raw body and signed headers, form-encoded as Slack posts it. */
export function signSlackCommand(fields: Record<string, string>, signingSecret: string): { body: string; headers: Record<string, string> } {
  const body = new URLSearchParams(fields).toString();
  return { body, headers: { ...signSlackRequest(body, signingSecret), 'content-type': 'application/x-www-form-urlencoded' } };
}
