/** What the bench parent and its server children (`servers.ts`, `fake-model.ts`) agree on. Imports nothing heavy. */

export const SERVER_KINDS = ['bare', 'reference', 'switchboard', 'switchboard-limited', 'switchboard-chat', 'switchboard-channels'] as const;
/**
 * `bare`: fastify hello-world (the ceiling). `reference`: plain fastify listing the same personas
 * straight from better-sqlite3. `switchboard`: the app, rate limit off. `switchboard-limited`: the
 * app with the limiter on but never tripping. `switchboard-chat`: the app, rate limit off, one chat
 * persona and a knowledge base of `CHAT_SOURCE_COUNT` short sources, answering with the fake model
 * whose base URL (`http://127.0.0.1:<port>/v1`) is in the child's `FAKE_MODEL_URL_ENV` variable.
 * `switchboard-channels`: the app, rate limit off, the offline model, one persona over a knowledge
 * base of `CHANNELS_SOURCE_COUNT` short sources, a webhook channel and a Slack Events API channel
 * routed to it (secrets below); the Slack Web API is the fake Slack at `FAKE_SLACK_URL_ENV`.
 */
export type ServerKind = (typeof SERVER_KINDS)[number];

export const PERSONA_COUNT = 20;
/** High enough never to trip during a run, so the limiter's bookkeeping is measured, not its 429s. */
export const HIGH_RATE_LIMIT = 100_000_000;
/** Knowledge sources of the `switchboard-chat` server (about one chunk each). */
export const CHAT_SOURCE_COUNT = 200;
/** The environment variable a `switchboard-chat` child reads the fake model's base URL from. */
export const FAKE_MODEL_URL_ENV = 'BENCH_FAKE_MODEL_URL';

/** Knowledge sources of the `switchboard-channels` server (the chat corpus's first ones). */
export const CHANNELS_SOURCE_COUNT = 200;
/** The environment variable a `switchboard-channels` child reads the fake Slack's Web API URL (`…/api/`) from. */
export const FAKE_SLACK_URL_ENV = 'BENCH_FAKE_SLACK_URL';
/** Credentials of the `switchboard-channels` server's channels: bench-only values, known to both sides. */
export const CHANNELS_WEBHOOK_SECRET = 'bench-webhook-secret-0123456789abcdef';
export const CHANNELS_SLACK_BOT_TOKEN = 'xoxb-bench-bot-token';
export const CHANNELS_SLACK_SIGNING_SECRET = 'bench-slack-signing-secret';

/** The channels a `switchboard-channels` server created. */
export interface BenchChannels {
  webhookId: string;
  slackId: string;
}

export type ChildMessage =
  /** `personaId`: the chat persona of a `switchboard-chat` or `switchboard-channels` server, else null; `channels`: the latter's channels. */
  | { type: 'ready'; port: number; key: string | null; personaId: string | null; channels?: BenchChannels }
  | { type: 'cpu'; usage: NodeJS.CpuUsage }
  /** `process.memoryUsage()` right after a full GC (when the child runs with `--expose-gc`). */
  | { type: 'memory'; usage: NodeJS.MemoryUsage; gc: boolean }
  | { type: 'failed'; message: string };

export type ParentMessage = { type: 'cpu' } | { type: 'memory' } | { type: 'stop' };

/**
 * The fake model (`fake-model.ts`). `instant`: every completion is answered at once, the whole SSE
 * body in one write. `hold`: a streamed completion sends its role chunk and first token at once,
 * then one token per `tickMs` to every held stream (one shared timer), until `finish` (or
 * `maxHoldMs`), then its finish chunk, usage chunk and `[DONE]`.
 */
export type FakeModelMode = 'instant' | 'hold';

export interface FakeModelSettings {
  mode: FakeModelMode;
  tickMs: number;
  maxHoldMs: number;
}

export interface FakeModelStats {
  /** Completions answered (instant) or opened (hold) since the start. */
  completions: number;
  /** Streams held open right now. */
  held: number;
  /** Held streams finished so far (by `finish`, by `maxHoldMs`) with `[DONE]`. */
  finished: number;
}

export type FakeParentMessage =
  | ParentMessage
  | { type: 'set'; settings: Partial<FakeModelSettings> }
  /** Ends every held stream properly; answered with `finished` and how many. */
  | { type: 'finish' }
  | { type: 'stats' }
  /** The raw bodies of the latest distinct chat completion requests (at most 64), oldest first. */
  | { type: 'requests' };

export type FakeChildMessage =
  | ChildMessage
  | { type: 'set'; settings: FakeModelSettings }
  | { type: 'finished'; count: number }
  | { type: 'stats'; stats: FakeModelStats }
  | { type: 'requests'; bodies: string[] };

/** The replies the fake Slack (`fake-slack.ts`) saw in one thread since its last `reset`. */
export interface FakeSlackThread {
  /** Successful chat.postMessage calls with this `thread_ts`. */
  posts: number;
  /** Of which the channels' apology (an answer that failed). */
  apologies: number;
  /** Date.now() in the fake when the first post arrived, and the latest post or edit (chat.update) of the thread's replies. */
  firstAt: number;
  lastAt: number;
}

/** What the fake Slack saw since its last `reset`. */
export interface FakeSlackStats {
  posts: number;
  /** Successful chat.update calls (progressive edits). */
  updates: number;
  /** Calls answered with an error (an HTTP error or `ok: false`). */
  errors: number;
  /** By `thread_ts` (the user's message ts: each answered message has its own). */
  threads: Record<string, FakeSlackThread>;
}

export type FakeSlackParentMessage = ParentMessage | { type: 'stats' } | { type: 'reset' };

export type FakeSlackChildMessage = ChildMessage | { type: 'stats'; stats: FakeSlackStats } | { type: 'reset' };
