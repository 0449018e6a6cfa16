/**
 * The contract between the channels service (src/business/channels/) and a platform bridge
 * (DESIGN.md "Channels"). A bridge only speaks its platform: it turns platform events into
 * `InboundMessage`s and `InboundReaction`s, and posts, edits and splits replies. Routing, sessions,
 * de-duplication, the inbox and feedback belong to the service.
 */
import type { Logger } from 'pino';

export type ChannelType = 'slack' | 'discord' | 'webhook';

export interface ChannelSettings {
  /** `mentions`: answer only when the bot is mentioned (direct messages are always answered); `all`: every message. */
  respondTo: 'mentions' | 'all';
  /** Slack: reply in the message's thread (a new thread under a top-level message). Discord: reply to the message. */
  replyInThread: boolean;
  /** Platform conversation ids (Slack channel ids, Discord channel ids) the bot listens in; empty = all. */
  allowedConversations: string[];
  enabled: boolean;
  /** Slack: stream answers natively where the workspace allows (else post, then edit). */
  streaming: boolean;
  /** Slack and Discord: feedback buttons under every answer (a click arrives as `onFeedback`). */
  feedbackButtons: boolean;
  /** Slack: loading messages shown, rotating, while an answer is worked out; empty = the default. */
  statusMessages: string[];
  /** Slack: the prompts a new assistant thread suggests; empty = the service's defaults. */
  suggestedPrompts: SuggestedPrompt[];
}

export interface SuggestedPrompt {
  title: string;
  message: string;
}

/** Where a reply goes. Opaque to the service: the bridge that made it reads it back. */
export type ReplyTarget = Record<string, string | boolean | null>;

/** A message a user sent on the platform, already filtered of the bot's own and other bots' messages. */
export interface InboundMessage {
  /** The platform's id of this delivery, stable across retries (Slack `event_id`, Discord message id). */
  externalId: string;
  /**
   * The conversation it belongs to, one session each: a Slack thread (`<channel>:<thread ts>`, the
   * message's own ts for a top-level message), a Discord channel or thread id.
   */
  conversationId: string;
  /** The platform conversation (Slack channel id, Discord channel id — a thread's parent), matched against `allowedConversations`. */
  conversationRef: string;
  /** The platform's user id of the sender. */
  userId: string;
  /** The text, with the bot's mention removed and platform markup turned into plain text. */
  text: string;
  /** A direct message to the bot: always answered. */
  direct: boolean;
  /** The bot was mentioned. */
  mentioned: boolean;
  /** Where the reply to this message goes. */
  replyTo: ReplyTarget;
  /**
   * false: the channel's settings would not answer it (a thread reply without a mention, or outside
   * `allowedConversations`). Such a message is delivered only from a thread, where it may be a team
   * member's reply in a handoff's desk thread; the service drops it otherwise. Absent: true.
   */
  addressed?: boolean;
}

/** The action ids of the buttons under an answer: feedback (👍/👎) and Regenerate (Slack). */
export const FEEDBACK_ACTION = 'switchboard.feedback';
export const REGENERATE_ACTION = 'switchboard.regenerate';

/** A click on a button the bot posted (`OutboundMessage.buttons`). */
export interface InboundAction {
  /** The button's id and value as posted. */
  actionId: string;
  value: string;
  /** The platform's user id of who clicked. */
  userId: string;
  /** The conversation a reply in the clicked message's thread carries (as `InboundMessage.conversationId`). */
  conversationId: string;
  /** The platform id of the message clicked (Slack ts, Discord message id). */
  messageId: string;
  /** This click, stable across the platform's retries of it (Slack `action_ts`). */
  clickId?: string | undefined;
  /** Where an answer to the click goes (its thread, to the user who clicked). */
  replyTo?: ReplyTarget | undefined;
}

/** A click on an answer's feedback buttons: a rating of that answer. */
export interface InboundFeedback {
  /** The platform id of the answer's message (Slack ts). */
  messageExternalId: string;
  userId: string;
  /** Positive → 5, negative → 1. */
  rating: 5 | 1;
}

/** A 👍 or 👎 on one of the bot's messages. */
export interface InboundReaction {
  /** The platform id of the message reacted to (Slack ts, Discord message id). */
  messageExternalId: string;
  userId: string;
  /** 👍 → 5, 👎 → 1 (API.md §9: reactions become feedback). */
  rating: 5 | 1;
}

/** What a bridge tells the service. `onMessage` resolves once the message is stored, not answered. */
export interface BridgeEvents {
  onMessage(message: InboundMessage): Promise<void>;
  onReaction(reaction: InboundReaction): Promise<void>;
  /** A button click (Slack `block_actions`, a Discord component); acknowledged by the bridge first. */
  onAction?(action: InboundAction): Promise<void>;
  /** A click on an answer's feedback buttons; the service keeps one per person and answer. */
  onFeedback?(feedback: InboundFeedback): Promise<void>;
  /** A user opened a new assistant thread (Slack's side panel): the prompts to suggest there. */
  suggestPrompts?(): Promise<SuggestedPrompt[]>;
  /** The connection's state, with a readable reason (e.g. "Slack rejected the bot token (invalid_auth)"). */
  onStatus(status: 'connecting' | 'connected' | 'error', detail: string | null): void;
}

/** A reply being written: shown progressively where the platform allows editing. */
export interface ReplyWriter {
  /**
   * The answer so far (the whole text, not a delta). The bridge decides when to show it: at most
   * about once a second, by posting then editing one message. Never throws; never waits for the platform.
   */
  progress(textSoFar: string): void;
  /**
   * The final answer: edits or posts it, split at the platform's limit. Answers the platform ids of
   * every part. `answerButtons: false`: a notice, not an answer (a handoff's): no feedback or
   * Regenerate buttons under it, whatever the settings say.
   */
  finish(text: string, options?: FinishOptions): Promise<string[]>;
  /** The answer failed: replaces any partial text with `text` (a short apology), or posts it. */
  fail(text: string): Promise<void>;
  /** What the answer is doing now ("Searching the knowledge…"), where the platform shows a status. Never throws. */
  status?(text: string): void;
  /** Nothing will be written (a person has the conversation): takes back what the writer showed meanwhile (a status). Never throws. */
  discard?(): Promise<void>;
}

export interface FinishOptions {
  /** Default true: the answer buttons the channel's settings ask for. */
  answerButtons?: boolean | undefined;
}

export interface OutboundMessage {
  /** Platform conversation id (Slack channel id, Discord channel id). */
  to: string;
  text: string;
  /** Slack thread ts / Discord message id to reply to. */
  threadId?: string | undefined;
  priority: 'low' | 'normal' | 'high';
  /** Buttons under the text (Slack `actions` block, Discord buttons); a click arrives as `onAction`. */
  buttons?: OutboundButton[] | undefined;
  /** Start a thread on the message, with this name, for the replies (Discord; a Slack message is a thread already). */
  startThread?: string | undefined;
}

export interface OutboundButton {
  id: string;
  label: string;
  value: string;
  style?: 'primary' | 'danger' | undefined;
}

export interface SendResult {
  /** The platform's id of the (first part of the) message. */
  externalId: string;
  /** The conversation a reply in this message's thread carries (as `InboundMessage.conversationId`), where the platform says. */
  thread?: string | undefined;
}

/** A raw HTTP request handed to a bridge by its inbound route (Slack Events API). */
export interface RawHttpRequest {
  rawBody: Buffer;
  headers: Record<string, string | string[] | undefined>;
}

export interface RawHttpResponse {
  status: number;
  headers?: Record<string, string>;
  body: string;
}

export interface ChannelBridge {
  /** Connects (Socket Mode, gateway) or gets ready to receive (Events API); reports through `onStatus`. Rejects when the credentials are refused. */
  start(): Promise<void>;
  /** Disconnects; pending replies may still finish. Safe to call twice. */
  stop(): Promise<void>;
  /** Posts a message (split at the platform's limit; `high` priority goes ahead of queued sends). Answers the first part's platform id. */
  send(message: OutboundMessage): Promise<SendResult>;
  /** Starts a reply to `target` (Discord shows "typing…" until the first text). */
  reply(target: ReplyTarget): ReplyWriter;
  /**
   * Slack Events API only: a delivery to `POST /business/channels/:id/slack/events`. Verifies the
   * signature and timestamp (throws UnauthorizedError from src/errors.ts when either is wrong),
   * refuses a signed body that is no Slack delivery (throws the ValidationError or InvalidJsonError
   * to answer), answers `url_verification`, and acknowledges at once — the answer is produced
   * afterwards. Every failure is thrown as an AppError, so the route answers it as problem+json.
   */
  handleHttp?(request: RawHttpRequest): Promise<RawHttpResponse>;
}

export interface BridgeOptions<C> {
  channelId: string;
  credentials: C;
  /** Read at every event, so settings changed through the API apply without a restart. */
  settings: () => ChannelSettings;
  /** Platform API base from the configuration (`SWITCHBOARD_SLACK_API_URL`, `SWITCHBOARD_DISCORD_API_URL`); undefined = the platform's. */
  apiUrl: string | undefined;
  events: BridgeEvents;
  logger: Logger;
}

/** Builds a bridge; the channels service calls it for each enabled channel of its type. */
export type BridgeFactory<C> = (options: BridgeOptions<C>) => ChannelBridge;

/** Credentials per platform (API.md §9). */
export interface SlackCredentials {
  botToken: string;
  /** Events API. */
  signingSecret?: string | undefined;
  /** Socket Mode. */
  appToken?: string | undefined;
}

export interface DiscordCredentials {
  botToken: string;
}
