/**
 * A fake Slack on 127.0.0.1 for tests that drive the real @slack/bolt and @slack/web-api.
 *
 * - Web API under `/api/<method>`: form-encoded or JSON bodies, the token from `Authorization:
 *   Bearer` or a `token` field. `auth.test`, `chat.postMessage` (to a user id: their DM, `D…`), `chat.update`, `reactions.add`,
 *   `reactions.remove`, `apps.connections.open`; every call recorded with its arrival time.
 *   `rateLimit(method, seconds)` answers the next call 429 with `Retry-After`; `failNext` answers
 *   `ok: false` with an error code.
 * - Socket Mode at `/socket` (`ws` package): sends `hello` on connect, `push()` sends an
 *   `events_api` envelope, acks are recorded, `drop()` cuts every connection, `sendDisconnect()`
 *   sends Slack's `disconnect` message; `pushCommand()` sends a `slash_commands` envelope.
 * - `responseUrl`: a slash command's `response_url`; what the app posts there is in `responses`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

export interface FakeSlackOptions {
  botToken: string;
  /** Answer `chat.startStream` / `appendStream` / `stopStream` and `assistant.threads.setStatus` (else `unknown_method`, as a Slack without them). */
  aiApps?: boolean;
  appToken?: string;
  botUserId?: string;
  botId?: string;
  teamId?: string;
}

export interface SlackCall {
  method: string;
  token: string | null;
  body: Record<string, unknown>;
  /** Date.now() when the request arrived. */
  at: number;
  /** What the fake answered: the HTTP status and Slack's `error` code when not ok. */
  status: number;
  error: string | null;
  /** The JSON the fake answered. */
  response: Record<string, unknown> | null;
}

export interface SocketAck {
  envelope_id: string;
  payload: unknown;
}

export interface FakeSlack {
  /** The Web API base, ending in `/api/` (for `slackApiUrl` / SWITCHBOARD_SLACK_API_URL). */
  apiUrl: string;
  botUserId: string;
  botId: string;
  teamId: string;
  calls: SlackCall[];
  /** Successful calls to one method, oldest first. */
  ok(method: string): SlackCall[];
  /** The next `times` calls to `method` get 429 with `Retry-After: <seconds>`. */
  rateLimit(method: string, seconds: number, times?: number): void;
  /** The next call to `method` answers `{ ok: false, error }`. */
  failNext(method: string, error: string): void;
  /** Every call to `method` answers `{ ok: false, error }` from now on (null: answered again). */
  refuse(method: string, error: string | null): void;
  /** A slash command's `response_url` here; what the app posts to it lands in `responses`. */
  responseUrl: string;
  responses: Array<Record<string, unknown>>;
  /** A message's text as it stands (posted, edited or streamed), by channel and ts. */
  text(channel: string, ts: string): string | undefined;
  socket: {
    /** Connections accepted so far (each one got `hello`). */
    readonly connections: number;
    /** Connections open now. */
    readonly open: number;
    acks: SocketAck[];
    /** Sends an `events_api` envelope with this event callback on every open connection; answers its envelope id. */
    push(eventCallback: Record<string, unknown>, extra?: { retry_attempt?: number; retry_reason?: string }): string;
    /** Sends a `slash_commands` envelope with these form fields as its payload; answers its envelope id. */
    pushCommand(fields: Record<string, string>): string;
    /** Cuts every connection without a close handshake. */
    drop(): void;
    /** Sends Slack's `disconnect` message (the client is expected to reconnect). */
    sendDisconnect(reason?: string): void;
  };
  /** Resolves once `check()` holds; rejects after `timeoutMs` naming `what`. */
  waitFor(what: string, check: () => boolean, timeoutMs?: number): Promise<void>;
  reset(): void;
  close(): Promise<void>;
}

export async function startFakeSlack(options: FakeSlackOptions): Promise<FakeSlack> {
  const botUserId = options.botUserId ?? 'UBOT';
  const botId = options.botId ?? 'BBOT';
  const teamId = options.teamId ?? 'T1';
  const calls: SlackCall[] = [];
  const responses: Array<Record<string, unknown>> = [];
  const acks: SocketAck[] = [];
  const rateLimits = new Map<string, { seconds: number; times: number }>();
  const failures = new Map<string, string>();
  const refusals = new Map<string, string>();
  const streams = new Map<string, { stopped: boolean }>();
  const messages = new Map<string, string>();
  const sockets = new Set<WebSocket>();
  let connections = 0;
  let tsCounter = 0;
  let envelopeCounter = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (req.method === 'POST' && url.pathname === '/response') {
        responses.push(parseBody(Buffer.concat(chunks).toString('utf8'), req.headers['content-type'] ?? ''));
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
        return;
      }
      if (req.method !== 'POST' || !url.pathname.startsWith('/api/')) {
        res.writeHead(404).end();
        return;
      }
      const method = url.pathname.slice('/api/'.length);
      const body = parseBody(Buffer.concat(chunks).toString('utf8'), req.headers['content-type'] ?? '');
      const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      const token = bearer ?? (typeof body.token === 'string' ? body.token : null);
      const call: SlackCall = { method, token, body, at: Date.now(), status: 200, error: null, response: null };
      calls.push(call);
      const limit = rateLimits.get(method);
      if (limit && limit.times > 0) {
        limit.times -= 1;
        call.status = 429;
        call.error = 'ratelimited';
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': String(limit.seconds) });
        res.end(JSON.stringify({ ok: false, error: 'ratelimited' }));
        return;
      }
      const answer = (payload: Record<string, unknown>): void => {
        if (payload.ok === false) call.error = String(payload.error);
        call.response = payload;
        res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
        res.end(JSON.stringify(payload));
      };
      const scripted = failures.get(method);
      if (scripted !== undefined) {
        failures.delete(method);
        answer({ ok: false, error: scripted });
        return;
      }
      const refused = refusals.get(method);
      if (refused !== undefined) {
        answer({ ok: false, error: refused });
        return;
      }
      answer(route(method, token, body));
    });
  });

  function route(method: string, token: string | null, body: Record<string, unknown>): Record<string, unknown> {
    if (method === 'apps.connections.open') {
      if (!options.appToken || token !== options.appToken) return { ok: false, error: 'invalid_auth' };
      return { ok: true, url: `ws://127.0.0.1:${port()}/socket?ticket=${connections + 1}` };
    }
    if (token !== options.botToken) return { ok: false, error: token ? 'invalid_auth' : 'not_authed' };
    const channel = typeof body.channel === 'string' ? body.channel : '';
    const text = typeof body.text === 'string' ? body.text : '';
    switch (method) {
      case 'auth.test':
        return { ok: true, url: 'https://fake.slack.com/', team: 'Fake', user: 'switchboard', team_id: teamId, user_id: botUserId, bot_id: botId };
      case 'chat.postMessage': {
        if (!channel) return { ok: false, error: 'channel_not_found' };
        if (!text) return { ok: false, error: 'no_text' };
        if (text.length > 40_000) return { ok: false, error: 'msg_too_long' };
        tsCounter += 1;
        const ts = `${1_700_000_000 + tsCounter}.${String(tsCounter).padStart(6, '0')}`;
        // A user id names the app's direct messages with them, as Slack does: the answer names the DM channel.
        const at = /^[UW]/.test(channel) ? `D${channel.slice(1)}` : channel;
        messages.set(`${at}:${ts}`, text);
        return { ok: true, channel: at, ts, message: { type: 'message', text, user: botUserId, bot_id: botId, ts } };
      }
      case 'chat.update': {
        const ts = typeof body.ts === 'string' ? body.ts : '';
        if (!messages.has(`${channel}:${ts}`)) return { ok: false, error: 'message_not_found' };
        if (!text) return { ok: false, error: 'no_text' };
        messages.set(`${channel}:${ts}`, text);
        return { ok: true, channel, ts, text };
      }
      case 'reactions.add':
      case 'reactions.remove':
        return { ok: true };
      case 'chat.startStream': {
        if (!options.aiApps) return { ok: false, error: 'unknown_method' };
        const markdown = typeof body.markdown_text === 'string' ? body.markdown_text : '';
        if (!channel) return { ok: false, error: 'channel_not_found' };
        if (typeof body.thread_ts !== 'string') return { ok: false, error: 'invalid_arguments' };
        // Outside a DM, Slack streams to one recipient.
        if (!channel.startsWith('D') && (typeof body.recipient_user_id !== 'string' || typeof body.recipient_team_id !== 'string')) return { ok: false, error: 'invalid_arguments' };
        tsCounter += 1;
        const ts = `${1_700_000_000 + tsCounter}.${String(tsCounter).padStart(6, '0')}`;
        messages.set(`${channel}:${ts}`, markdown);
        streams.set(`${channel}:${ts}`, { stopped: false });
        return { ok: true, channel, ts };
      }
      case 'chat.appendStream':
      case 'chat.stopStream': {
        if (!options.aiApps) return { ok: false, error: 'unknown_method' };
        const key = `${channel}:${typeof body.ts === 'string' ? body.ts : ''}`;
        const stream = streams.get(key);
        if (!stream) return { ok: false, error: 'message_not_found' };
        if (stream.stopped) return { ok: false, error: 'message_not_in_streaming_state' };
        const markdown = typeof body.markdown_text === 'string' ? body.markdown_text : '';
        if (method === 'chat.appendStream' && !markdown) return { ok: false, error: 'invalid_arguments' };
        messages.set(key, (messages.get(key) ?? '') + markdown);
        if (method === 'chat.stopStream') stream.stopped = true;
        return { ok: true, channel, ts: body.ts };
      }
      case 'assistant.threads.setSuggestedPrompts':
      case 'assistant.threads.setTitle':
        if (!options.aiApps) return { ok: false, error: 'unknown_method' };
        if (typeof body.channel_id !== 'string' || typeof body.thread_ts !== 'string') return { ok: false, error: 'invalid_arguments' };
        if (method === 'assistant.threads.setSuggestedPrompts' && (!Array.isArray(body.prompts) || body.prompts.length === 0 || body.prompts.length > 4)) return { ok: false, error: 'invalid_arguments' };
        if (method === 'assistant.threads.setTitle' && (typeof body.title !== 'string' || body.title === '')) return { ok: false, error: 'invalid_arguments' };
        return { ok: true };
      case 'assistant.threads.setStatus':
        if (!options.aiApps) return { ok: false, error: 'unknown_method' };
        if (typeof body.channel_id !== 'string' || typeof body.thread_ts !== 'string' || typeof body.status !== 'string') return { ok: false, error: 'invalid_arguments' };
        return { ok: true };
      default:
        return { ok: false, error: 'unknown_method' };
    }
  }

  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    if (!(req.url ?? '').startsWith('/socket')) {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      connections += 1;
      sockets.add(ws);
      ws.on('close', () => sockets.delete(ws));
      ws.on('error', () => sockets.delete(ws));
      ws.on('message', (data) => {
        try {
          const message = JSON.parse(String(data)) as { envelope_id?: string; payload?: unknown };
          if (typeof message.envelope_id === 'string') acks.push({ envelope_id: message.envelope_id, payload: message.payload });
        } catch {
          // not JSON: ignored, as Slack would
        }
      });
      ws.send(JSON.stringify({ type: 'hello', num_connections: sockets.size, debug_info: { host: 'fake' }, connection_info: { app_id: 'AFAKE' } }));
    });
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (): number => (server.address() as AddressInfo).port;

  return {
    apiUrl: `http://127.0.0.1:${port()}/api/`,
    responseUrl: `http://127.0.0.1:${port()}/response`,
    responses,
    botUserId,
    botId,
    teamId,
    calls,
    ok: (method) => calls.filter((c) => c.method === method && c.status === 200 && c.error === null),
    rateLimit(method, seconds, times = 1) {
      rateLimits.set(method, { seconds, times });
    },
    failNext(method, error) {
      failures.set(method, error);
    },
    refuse(method, error) {
      if (error === null) refusals.delete(method);
      else refusals.set(method, error);
    },
    text: (channel, ts) => messages.get(`${channel}:${ts}`),
    socket: {
      get connections() {
        return connections;
      },
      get open() {
        return sockets.size;
      },
      acks,
      push(eventCallback, extra = {}) {
        envelopeCounter += 1;
        const envelopeId = `env-${envelopeCounter}`;
        const envelope = { envelope_id: envelopeId, type: 'events_api', payload: eventCallback, accepts_response_payload: false, retry_attempt: 0, retry_reason: '', ...extra };
        for (const ws of sockets) ws.send(JSON.stringify(envelope));
        return envelopeId;
      },
      pushCommand(fields) {
        envelopeCounter += 1;
        const envelopeId = `env-${envelopeCounter}`;
        const envelope = { envelope_id: envelopeId, type: 'slash_commands', payload: fields, accepts_response_payload: true };
        for (const ws of sockets) ws.send(JSON.stringify(envelope));
        return envelopeId;
      },
      drop() {
        for (const ws of sockets) ws.terminate();
      },
      sendDisconnect(reason = 'refresh_requested') {
        for (const ws of sockets) ws.send(JSON.stringify({ type: 'disconnect', reason, debug_info: { host: 'fake' } }));
      },
    },
    async waitFor(what, check, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      while (!check()) {
        if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    reset() {
      calls.length = 0;
      responses.length = 0;
      acks.length = 0;
      rateLimits.clear();
      failures.clear();
      refusals.clear();
    },
    async close() {
      for (const ws of sockets) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Form fields (JSON-looking values parsed, as the SDK serialises objects) or a JSON body. */
function parseBody(raw: string, contentType: string): Record<string, unknown> {
  if (raw === '') return {};
  if (contentType.includes('application/json')) {
    try {
      return JSON.parse(raw) as Record<string, unknown>;
    } catch {
      return {};
    }
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of new URLSearchParams(raw)) {
    out[key] = /^[[{]/.test(value) ? safeJson(value) : value;
  }
  return out;
}

function safeJson(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}
