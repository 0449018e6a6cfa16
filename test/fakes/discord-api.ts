/**
 * A fake Discord on 127.0.0.1 (port 0) for tests that drive the real discord.js: the REST API v10
 * under `/api/v10` and the gateway (`discord-gateway.ts`) on the same port.
 *
 * REST: `GET /gateway/bot` (points at the fake gateway), `GET /users/@me`, `GET /users/:id`,
 * `GET /channels/:id`, `GET|POST /channels/:id/messages[/:mid]`, `PATCH /channels/:id/messages/:mid`,
 * `POST /channels/:id/typing`, `POST /channels/:id/messages/:mid/threads` (a public thread with the
 * message's id, announced by THREAD_CREATE), `POST /interactions/:id/:token/callback` (recorded in
 * `callbacks`; no token, as Discord). `click()` dispatches a button's INTERACTION_CREATE. The bot token is checked (`Authorization: Bot <token>`, 401
 * otherwise); message content is validated as Discord does (1–2,000 characters, 400 code 50035).
 * Every answer carries `x-ratelimit-*` headers; scripted behaviours (`fail(route, ...)`) answer a
 * route's next requests with a 429 (with `Retry-After`, `retry_after`, `x-ratelimit-scope`), any
 * status, or a delay. Posted messages are echoed on the gateway as MESSAGE_CREATE, like Discord.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { BOT, CHANNELS, channelPayload, FAKE_DISCORD_TOKEN, type FakeUser, GUILD_ID, type MessageInput, messagePayload, snowflake, threadPayload, USERS } from './discord-fixtures.js';
import { FakeGateway, type GatewaySettings } from './discord-gateway.js';

export interface RecordedRequest {
  method: string;
  /** The path after `/api/v10`, e.g. `/channels/300000000000000001/messages`. */
  path: string;
  /** Method and path with ids as `:id`, e.g. `POST /channels/:id/messages`. */
  route: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  at: number;
}

/** A message the bot posted, with its edits. */
export interface PostedMessage {
  id: string;
  channelId: string;
  content: string;
  /** The first POST's body (`allowed_mentions`, `message_reference`...). */
  body: Record<string, unknown>;
  edits: Array<{ content: string; body: Record<string, unknown>; at: number }>;
  at: number;
}

export type Scripted =
  | { kind: 'rate-limit'; retryAfter: number; scope?: 'user' | 'shared' | 'global' }
  | { kind: 'status'; status: number; body?: unknown }
  | { kind: 'delay'; ms: number };

export interface FakeDiscordSettings extends GatewaySettings {
  /** Echo the bot's posted messages on the gateway (MESSAGE_CREATE), as Discord does. */
  echo: boolean;
  /** The token REST accepts when it differs from the gateway's `token` (null = the same). */
  restToken: string | null;
}

export interface FakeDiscord {
  /** REST base for discord.js's `rest.api` / SWITCHBOARD_DISCORD_API_URL: `http://127.0.0.1:<port>/api`. */
  apiUrl: string;
  gatewayUrl: string;
  gateway: FakeGateway;
  requests: RecordedRequest[];
  /** Messages the bot posted, oldest first. */
  posted: PostedMessage[];
  /** Queue behaviours for the next requests to `route` (`"POST /channels/:id/messages"`), in order. */
  fail(route: string, ...behaviours: Scripted[]): void;
  set(settings: Partial<FakeDiscordSettings>): void;
  /** Dispatches MESSAGE_CREATE for a user's message; answers the payload. */
  userMessage(input: MessageInput): Record<string, unknown>;
  /** Interaction callbacks the bot answered, oldest first. */
  callbacks: Array<{ interactionId: string; type: number; at: number }>;
  /** Guild command registrations (`PUT /applications/:id/guilds/:id/commands`), oldest first. */
  commands: Array<{ guildId: string; commands: Array<Record<string, unknown>> }>;
  /** Dispatches INTERACTION_CREATE for a slash command with string options; answers the interaction id. */
  slash(input: { user: FakeUser; channelId: string; name: string; options: Record<string, string> }): string;
  /** Dispatches INTERACTION_CREATE for a click on a button (`customId`) of a message the bot posted; answers the interaction id. */
  click(input: { user: FakeUser; messageId: string; customId: string }): string;
  /** Dispatches MESSAGE_REACTION_ADD (with `guild_id` and `member` in a guild channel). */
  react(input: { user: FakeUser; channelId: string; messageId: string; emoji: string }): void;
  close(): Promise<void>;
}

const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
};

const invalidContent = (content: unknown): string | null => {
  if (typeof content !== 'string' || content.length === 0) return 'Cannot send an empty message';
  if (content.length > 2000) return 'Must be 2000 or fewer in length.';
  return null;
};

export async function startFakeDiscord(options: Partial<FakeDiscordSettings> & { token?: string } = {}): Promise<FakeDiscord> {
  let settings: FakeDiscordSettings = { token: FAKE_DISCORD_TOKEN, heartbeatIntervalMs: 1000, ackHeartbeats: true, acceptConnections: true, echo: true, restToken: null, ...options };
  const requests: RecordedRequest[] = [];
  const callbacks: FakeDiscord['callbacks'] = [];
  /** Interactions dispatched and not yet answered: their channel and token. */
  const interactions = new Map<string, { channelId: string; token: string; user: FakeUser }>();
  /** A deferred interaction response's message, by the interaction's token. */
  const originals = new Map<string, string>();
  const commands: FakeDiscord['commands'] = [];
  const posted: PostedMessage[] = [];
  const messages = new Map<string, Record<string, unknown>>();
  const scripts = new Map<string, Scripted[]>();
  const timers = new Set<NodeJS.Timeout>();
  const delay = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => (timers.delete(t), resolve()), ms);
      timers.add(t);
    });

  const rateHeaders = (route: string, remaining: number, resetAfter: number): Record<string, string> => ({
    'x-ratelimit-limit': '5',
    'x-ratelimit-remaining': String(remaining),
    'x-ratelimit-reset': String(Date.now() / 1000 + resetAfter),
    'x-ratelimit-reset-after': String(resetAfter),
    'x-ratelimit-bucket': Buffer.from(route).toString('hex').slice(0, 32),
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const body = raw === '' ? undefined : (JSON.parse(raw) as unknown);
    const url = new URL(req.url ?? '/', 'http://fake');
    if (!url.pathname.startsWith('/api/v10/')) return json(res, 404, { message: '404: Not Found', code: 0 });
    const path = url.pathname.slice('/api/v10'.length);
    const method = req.method ?? 'GET';
    const route = `${method} ${path.replace(/\/\d{5,20}(?=\/|$)/g, '/:id')}`;
    requests.push({ method, path, route, headers: req.headers, body, at: Date.now() });

    const callback = /^\/interactions\/(\d+)\/[^/]+\/callback$/.exec(path);
    if (callback && method === 'POST') {
      const known = interactions.get(callback[1]!);
      if (!known) return json(res, 404, { message: 'Unknown interaction', code: 10062 });
      interactions.delete(callback[1]!);
      const type = Number((body as { type?: unknown } | undefined)?.type);
      callbacks.push({ interactionId: callback[1]!, type, at: Date.now() });
      // A deferred response (5) shows a "thinking…" message in the channel, edited later through the interaction's webhook.
      if (type === 5) {
        const message: Record<string, unknown> = { ...messagePayload({ channelId: known.channelId, author: BOT, content: '' }), flags: 128, interaction_metadata: { id: callback[1], type: 2, user: known.user, authorizing_integration_owners: { '0': GUILD_ID } } };
        messages.set(message.id as string, message);
        originals.set(known.token, message.id as string);
        posted.push({ id: message.id as string, channelId: known.channelId, content: '', body: {}, edits: [], at: Date.now() });
      }
      res.writeHead(204, rateHeaders(route, 4, 1));
      res.end();
      return;
    }
    // An interaction's webhook (no bot token, as Discord): its original response, and follow-ups.
    const hook = /^\/webhooks\/(\d+)\/([^/]+)(?:\/messages\/(?:@|%40)original)?$/.exec(path);
    if (hook) {
      const token = hook[2]!;
      const originalId = originals.get(token);
      const b = (body ?? {}) as Record<string, unknown>;
      if (path.endsWith('original')) {
        const message = originalId ? messages.get(originalId) : undefined;
        const record = posted.find((p) => p.id === originalId);
        if (!message || !record) return json(res, 404, { message: 'Unknown Webhook', code: 10015 });
        if (method === 'GET') return json(res, 200, message, rateHeaders(route, 4, 1));
        if (method !== 'PATCH') return json(res, 405, { message: '405: Method Not Allowed', code: 0 });
        const invalid = invalidContent(b.content);
        if (invalid) return json(res, 400, { message: 'Invalid Form Body', code: 50035 });
        const updated = { ...message, content: b.content, flags: 0, ...(b.components ? { components: b.components } : {}), edited_timestamp: new Date().toISOString() };
        messages.set(originalId!, updated);
        record.content = b.content as string;
        record.edits.push({ content: b.content as string, body: b, at: Date.now() });
        return json(res, 200, updated, rateHeaders(route, 4, 1));
      }
      if (method !== 'POST' || !originalId) return json(res, 404, { message: 'Unknown Webhook', code: 10015 });
      const invalid = invalidContent(b.content);
      if (invalid) return json(res, 400, { message: 'Invalid Form Body', code: 50035 });
      const channelId = messages.get(originalId)!.channel_id as string;
      const message: Record<string, unknown> = { ...messagePayload({ channelId, author: BOT, content: b.content as string }), ...(b.components ? { components: b.components } : {}) };
      messages.set(message.id as string, message);
      posted.push({ id: message.id as string, channelId, content: b.content as string, body: b, edits: [], at: Date.now() });
      return json(res, 200, message, rateHeaders(route, 4, 1));
    }
    if (req.headers.authorization !== `Bot ${settings.restToken ?? settings.token}`) return json(res, 401, { message: '401: Unauthorized', code: 0 });
    const scripted = scripts.get(route)?.shift();
    if (scripted?.kind === 'rate-limit') {
      const scope = scripted.scope ?? 'user';
      return json(res, 429, { message: 'You are being rate limited.', retry_after: scripted.retryAfter, global: scope === 'global' }, {
        ...rateHeaders(route, 0, scripted.retryAfter),
        'retry-after': String(Math.ceil(scripted.retryAfter)),
        'x-ratelimit-scope': scope,
        ...(scope === 'global' ? { 'x-ratelimit-global': 'true' } : {}),
      });
    }
    if (scripted?.kind === 'status') return json(res, scripted.status, scripted.body ?? { message: `Scripted ${scripted.status}`, code: 0 });
    if (scripted?.kind === 'delay') await delay(scripted.ms);

    const ok = (status: number, answer: unknown) => json(res, status, answer, rateHeaders(route, 4, 1));
    const [, a, id, c, mid] = path.split('/');
    const registered = /^\/applications\/(\d+)\/guilds\/(\d+)\/commands$/.exec(path);
    if (registered && method === 'PUT') {
      const list = (Array.isArray(body) ? body : []) as Array<Record<string, unknown>>;
      const answer = list.map((cmd) => ({ ...cmd, id: snowflake(), application_id: registered[1], guild_id: registered[2], version: '1', default_member_permissions: null, nsfw: false }));
      commands.push({ guildId: registered[2]!, commands: answer });
      return ok(200, answer);
    }
    if (route === 'GET /gateway/bot') {
      return ok(200, { url: gatewayUrl, shards: 1, session_start_limit: { total: 1000, remaining: 999, reset_after: 14_400_000, max_concurrency: 1 } });
    }
    if (a === 'users' && method === 'GET') {
      const user = id === '@me' ? BOT : USERS.find((u) => u.id === id);
      return user ? ok(200, user) : json(res, 404, { message: 'Unknown User', code: 10013 });
    }
    if (a !== 'channels' || id === undefined) return json(res, 404, { message: '404: Not Found', code: 0 });
    const channel = channelPayload(id);
    if (!channel) return json(res, 404, { message: 'Unknown Channel', code: 10003 });
    if (route === 'GET /channels/:id') return ok(200, channel);
    if (route === 'POST /channels/:id/typing') return void (res.writeHead(204, rateHeaders(route, 4, 1)), res.end());
    if (route === 'POST /channels/:id/messages/:id/threads' && mid) {
      const message = messages.get(mid);
      if (!message || message.channel_id !== id) return json(res, 404, { message: 'Unknown Message', code: 10008 });
      const name = String((body as { name?: unknown } | undefined)?.name ?? '');
      if (name.length < 1 || name.length > 100) return json(res, 400, { message: 'Invalid Form Body', code: 50035 });
      const thread = threadPayload(mid, id, name, BOT.id);
      CHANNELS[mid] = thread;
      ok(201, { ...thread, guild_id: GUILD_ID });
      gateway.dispatch('THREAD_CREATE', { ...thread, guild_id: GUILD_ID, newly_created: true });
      return;
    }
    if (route === 'GET /channels/:id/messages/:id') {
      const message = messages.get(mid ?? '');
      return message && message.channel_id === id ? ok(200, message) : json(res, 404, { message: 'Unknown Message', code: 10008 });
    }
    const b = (body ?? {}) as Record<string, unknown>;
    const invalid = invalidContent(b.content);
    if (route === 'POST /channels/:id/messages') {
      if (invalid) return json(res, 400, { message: 'Invalid Form Body', code: 50035, errors: { content: { _errors: [{ code: 'BASE_TYPE_MAX_LENGTH', message: invalid }] } } });
      const reference = b.message_reference as { message_id?: string } | undefined;
      const replyTo = reference?.message_id ? messages.get(reference.message_id) : undefined;
      const message: Record<string, unknown> = { ...messagePayload({ channelId: id, author: BOT, content: b.content as string, ...(replyTo ? { replyTo } : {}) }), ...(b.components ? { components: b.components } : {}) };
      messages.set(message.id as string, message);
      posted.push({ id: message.id as string, channelId: id, content: b.content as string, body: b, edits: [], at: Date.now() });
      ok(200, message);
      if (settings.echo) gateway.dispatch('MESSAGE_CREATE', message);
      return;
    }
    if (route === 'PATCH /channels/:id/messages/:id' && c === 'messages' && mid) {
      const message = messages.get(mid);
      const record = posted.find((p) => p.id === mid);
      if (!message || !record) return json(res, 404, { message: 'Unknown Message', code: 10008 });
      if (invalid) return json(res, 400, { message: 'Invalid Form Body', code: 50035, errors: { content: { _errors: [{ code: 'BASE_TYPE_MAX_LENGTH', message: invalid }] } } });
      const updated = { ...message, content: b.content, edited_timestamp: new Date().toISOString() };
      messages.set(mid, updated);
      record.content = b.content as string;
      record.edits.push({ content: b.content as string, body: b, at: Date.now() });
      return ok(200, updated);
    }
    return json(res, 404, { message: '404: Not Found', code: 0 });
  }

  /** Dispatches an INTERACTION_CREATE in a server channel (a click, a slash command); answers its id. */
  function interact(user: FakeUser, channelId: string, fields: Record<string, unknown>): string {
    const id = snowflake();
    interactions.set(id, { channelId, token: `interaction-token-${id}`, user });
    const channel = channelPayload(channelId);
    gateway.dispatch('INTERACTION_CREATE', {
      id,
      application_id: BOT.id,
      guild_id: GUILD_ID,
      channel_id: channelId,
      ...(channel ? { channel: { ...channel, guild_id: GUILD_ID } } : {}),
      member: { user, roles: [], permissions: '1024', joined_at: '2024-01-01T00:00:00.000Z', deaf: false, mute: false, flags: 0 },
      token: `interaction-token-${id}`,
      version: 1,
      app_permissions: '1024',
      locale: 'en-US',
      guild_locale: 'en-US',
      entitlements: [],
      authorizing_integration_owners: { '0': GUILD_ID },
      context: 0,
      ...fields,
    });
    return id;
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) json(res, 500, { message: `Fake failure: ${String(err)}`, code: 0 });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const gatewayUrl = `ws://127.0.0.1:${port}`;
  const gateway = new FakeGateway(server, () => gatewayUrl, () => settings);

  return {
    apiUrl: `http://127.0.0.1:${port}/api`,
    gatewayUrl,
    gateway,
    requests,
    posted,
    fail: (route, ...behaviours) => void scripts.set(route, [...(scripts.get(route) ?? []), ...behaviours]),
    set: (changes) => void (settings = { ...settings, ...changes }),
    userMessage(input) {
      const message = messagePayload(input);
      messages.set(message.id as string, message);
      gateway.dispatch('MESSAGE_CREATE', message);
      return message;
    },
    callbacks,
    click({ user, messageId, customId }) {
      const message = messages.get(messageId);
      if (!message) throw new Error(`FakeDiscord.click: no message ${messageId}`);
      return interact(user, message.channel_id as string, { type: 3, data: { custom_id: customId, component_type: 2 }, message });
    },
    commands,
    slash({ user, channelId, name, options: values }) {
      const options = Object.entries(values).map(([key, value]) => ({ name: key, type: 3, value }));
      return interact(user, channelId, { type: 2, data: { id: snowflake(), name, type: 1, guild_id: GUILD_ID, options } });
    },
    react({ user, channelId, messageId, emoji }) {
      const guildId = channelPayload(channelId)?.guild_id as string | undefined;
      gateway.dispatch('MESSAGE_REACTION_ADD', {
        user_id: user.id,
        channel_id: channelId,
        message_id: messageId,
        emoji: { id: null, name: emoji },
        burst: false,
        type: 0,
        ...(guildId ? { guild_id: guildId, member: { user, roles: [], joined_at: '2024-01-01T00:00:00.000Z', deaf: false, mute: false, flags: 0 } } : {}),
      });
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      await gateway.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
