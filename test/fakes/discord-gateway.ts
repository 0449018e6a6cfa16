/**
 * The fake Discord gateway (a `ws` WebSocket server sharing the fake REST server's port), speaking
 * the real v10 JSON protocol in plain text frames: HELLO (op 10) on connect; IDENTIFY (op 2) checked
 * against the token (close 4004 otherwise) → READY (guild unavailable) + GUILD_CREATE; heartbeats
 * (op 1) answered with op 11; RESUME (op 6) replays the missed dispatches then RESUMED (an unknown
 * session gets op 9). Tests dispatch events, ask for op 7 RECONNECT, or drop the socket.
 * Every frame both ways is recorded.
 */
import type http from 'node:http';
import { type WebSocket, WebSocketServer } from 'ws';
import { BOT, GUILD_ID, guildCreate } from './discord-fixtures.js';

export interface GatewaySettings {
  token: string;
  heartbeatIntervalMs: number;
  /** Answer heartbeats with op 11 (false makes the client see a zombie connection). */
  ackHeartbeats: boolean;
  /** False: every new connection is killed at once (an outage). */
  acceptConnections: boolean;
}

export interface GatewayFrame {
  dir: 'in' | 'out';
  /** Which connection (0, 1, ... in order of connection). */
  conn: number;
  op: number;
  t: string | null;
  s: number | null;
  d: unknown;
  at: number;
}

export interface GatewayConnection {
  index: number;
  /** The URL's query string as the client sent it (`v=10&encoding=json`). */
  query: URLSearchParams;
  socket: WebSocket;
  /** True after IDENTIFY or RESUME was accepted. */
  live: boolean;
  closeCode: number | null;
}

interface Session {
  id: string;
  seq: number;
  history: Array<{ s: number; t: string; d: unknown }>;
  conn: GatewayConnection | null;
}

export class FakeGateway {
  readonly frames: GatewayFrame[] = [];
  readonly connections: GatewayConnection[] = [];
  private readonly wss: WebSocketServer;
  private session: Session | null = null;
  private sessions = 0;

  constructor(
    server: http.Server,
    private readonly url: () => string,
    private readonly settings: () => GatewaySettings,
  ) {
    this.wss = new WebSocketServer({ server, perMessageDeflate: false });
    this.wss.on('connection', (socket, req) => this.onConnection(socket, req));
  }

  /** Frames the client sent with this opcode (2 IDENTIFY, 6 RESUME, 1 heartbeat). */
  received(op: number): GatewayFrame[] {
    return this.frames.filter((f) => f.dir === 'in' && f.op === op);
  }

  /** The connection the current session is attached to, if any. */
  get current(): GatewayConnection | null {
    return this.session?.conn ?? null;
  }

  /** Sends a dispatch to the session (buffered for RESUME when its connection is gone); answers its sequence number. */
  dispatch(t: string, d: unknown): number {
    const session = this.session;
    if (!session) throw new Error('FakeGateway.dispatch: no session (the client never identified)');
    const s = ++session.seq;
    session.history.push({ s, t, d });
    const conn = session.conn;
    if (conn?.live && conn.socket.readyState === conn.socket.OPEN) this.send(conn, { op: 0, t, s, d });
    return s;
  }

  /** Sends op 7 RECONNECT on the live connection. */
  reconnect(): void {
    const conn = this.requireLive();
    this.send(conn, { op: 7, d: null, s: null, t: null });
  }

  /** Kills the live connection without a close frame (close code 1006 on the client). */
  drop(): void {
    const conn = this.requireLive();
    this.detach(conn);
    conn.socket.terminate();
  }

  /** Closes the live connection with `code` (e.g. 4000 unknown error, 4004 authentication failed). */
  closeWith(code: number, reason = ''): void {
    const conn = this.requireLive();
    this.detach(conn);
    conn.socket.close(code, reason);
  }

  async close(): Promise<void> {
    for (const conn of this.connections) conn.socket.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }

  private requireLive(): GatewayConnection {
    const conn = this.current;
    if (!conn || conn.socket.readyState !== conn.socket.OPEN) throw new Error('FakeGateway: no live connection');
    return conn;
  }

  private detach(conn: GatewayConnection): void {
    conn.live = false;
    if (this.session?.conn === conn) this.session.conn = null;
  }

  private send(conn: GatewayConnection, payload: { op: number; d: unknown; s: number | null; t: string | null }): void {
    this.frames.push({ dir: 'out', conn: conn.index, ...payload, at: Date.now() });
    conn.socket.send(JSON.stringify(payload));
  }

  private onConnection(socket: WebSocket, req: http.IncomingMessage): void {
    const query = new URL(req.url ?? '/', 'http://fake').searchParams;
    const conn: GatewayConnection = { index: this.connections.length, query, socket, live: false, closeCode: null };
    this.connections.push(conn);
    socket.on('close', (code) => {
      conn.closeCode = code;
      this.detach(conn);
    });
    socket.on('error', () => undefined);
    socket.on('message', (data, isBinary) => this.onFrame(conn, data.toString(), isBinary));
    if (!this.settings().acceptConnections) return void socket.terminate();
    if (query.get('v') !== '10' || query.get('encoding') !== 'json') {
      socket.close(4012, 'Invalid API version');
      return;
    }
    this.send(conn, { op: 10, d: { heartbeat_interval: this.settings().heartbeatIntervalMs }, s: null, t: null });
  }

  private onFrame(conn: GatewayConnection, text: string, isBinary: boolean): void {
    let payload: { op?: unknown; d?: unknown };
    try {
      payload = JSON.parse(text) as { op?: unknown; d?: unknown };
    } catch {
      conn.socket.close(4002, 'Error while decoding payload.');
      return;
    }
    const op = typeof payload.op === 'number' ? payload.op : -1;
    this.frames.push({ dir: 'in', conn: conn.index, op, t: null, s: null, d: payload.d, at: Date.now() });
    if (isBinary) return void conn.socket.close(4002, 'Error while decoding payload.');
    const d = (payload.d ?? {}) as Record<string, unknown>;
    switch (op) {
      case 1:
        if (this.settings().ackHeartbeats) this.send(conn, { op: 11, d: null, s: null, t: null });
        return;
      case 2:
        return this.identify(conn, d);
      case 6:
        return this.resume(conn, d);
      case 3:
      case 4:
      case 8:
        return; // presence, voice, members: accepted and ignored
      default:
        conn.socket.close(4001, 'Unknown opcode.');
    }
  }

  private identify(conn: GatewayConnection, d: Record<string, unknown>): void {
    if (conn.live) return void conn.socket.close(4005, 'Already authenticated.');
    if (d.token !== this.settings().token) return void conn.socket.close(4004, 'Authentication failed.');
    if (this.session?.conn) this.session.conn.live = false;
    const session: Session = { id: `fake-session-${++this.sessions}`, seq: 0, history: [], conn };
    this.session = session;
    conn.live = true;
    this.dispatch('READY', {
      v: 10,
      user: BOT,
      guilds: [{ id: GUILD_ID, unavailable: true }],
      session_id: session.id,
      resume_gateway_url: this.url(),
      shard: [0, 1],
      application: { id: BOT.id, flags: 0 },
      user_settings: {},
      private_channels: [],
      presences: [],
      relationships: [],
      guild_join_requests: [],
      geo_ordered_rtc_regions: [],
    });
    this.dispatch('GUILD_CREATE', guildCreate());
  }

  private resume(conn: GatewayConnection, d: Record<string, unknown>): void {
    const session = this.session;
    if (d.token !== this.settings().token) return void conn.socket.close(4004, 'Authentication failed.');
    if (!session || d.session_id !== session.id || typeof d.seq !== 'number' || d.seq > session.seq) {
      this.send(conn, { op: 9, d: false, s: null, t: null });
      return;
    }
    session.conn = conn;
    conn.live = true;
    for (const event of session.history.filter((e) => e.s > (d.seq as number))) this.send(conn, { op: 0, t: event.t, s: event.s, d: event.d });
    this.dispatch('RESUMED', {});
  }
}
