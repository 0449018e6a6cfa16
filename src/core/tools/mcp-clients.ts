/**
 * One MCP `Client` per registered tool server (DESIGN.md "MCP"): connected lazily, its tool list
 * cached and refreshed on `notifications/tools/list_changed`, reconnected with capped exponential
 * back-off after a crash or a dropped session, a time-out per call and a cap on calls in flight.
 * A connection ends one of two ways: `retire()` when new settings replace it (calls already sent
 * finish on it, the others move on), `close()` when its server is removed (everything fails).
 */
import type { CallToolResult, Client, Tool } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import { UnavailableError, UpstreamError, UpstreamTimeoutError } from '../../errors.js';
import { CallGate } from '../../lib/call-gate.js';
import type { AddressGuardOptions } from '../../lib/address-guard.js';
import { type BearerSource, ConsentRequired } from './tool-oauth.js';
import { scrub, scrubText, secretValues, type ServerSecrets } from './vault.js';

interface ClientSdk {
  client: typeof import('@modelcontextprotocol/client');
  transports: typeof import('./transports.js');
}
let clientSdk: Promise<ClientSdk> | undefined;
/** Set once `loadClientSdk` resolved: every client and every error of one came after that. */
let loadedSdk: ClientSdk | undefined;

/**
 * The SDK's client side (v2: both protocol eras) with our transports (with ajv and its schemas:
 * several MB and a core's ~0.2 s of imports), imported at the first connection rather than at
 * every start (issue 23).
 */
function loadClientSdk(): Promise<ClientSdk> {
  clientSdk ??= Promise.all([import('@modelcontextprotocol/client'), import('./transports.js')]).then(([client, transports]) => (loadedSdk = { client, transports }));
  return clientSdk;
}

export type ServerStatus = 'connecting' | 'connected' | 'error' | 'needs_consent';

/** What a connection needs to know about its server; secrets already opened. */
export interface ServerSpec {
  id: string;
  name: string;
  transport: 'stdio' | 'http';
  command: string | null;
  args: string[];
  url: string | null;
  secrets: ServerSecrets;
  /** Why this server may not be started (a stdio server without the operator's opt-in), or null. */
  refused: string | null;
  /** An http server that signs in with OAuth: the tokens its requests carry (tool-oauth.ts). */
  bearer?: BearerSource | undefined;
}

export interface HubLimits {
  /** A call (queue wait and connecting included) fails with 504 after this long. Default 30 s. */
  callTimeoutMs: number;
  /** Connecting and listing tools fail after this long. Default 10 s. */
  connectTimeoutMs: number;
  /** Calls in flight per server. Default 4. */
  maxConcurrent: number;
  /** Calls waiting per server beyond the cap; more → 503. Default 16. */
  maxQueued: number;
  /** Reconnect back-off: first delay, doubled per failure up to the cap. Defaults 500 ms, 30 s. */
  backoffInitialMs: number;
  backoffMaxMs: number;
  /** How long a registration waits for the first status. Default 5 s. */
  initialWaitMs: number;
}

export const DEFAULT_HUB_LIMITS: HubLimits = {
  callTimeoutMs: 30_000,
  connectTimeoutMs: 10_000,
  maxConcurrent: 4,
  maxQueued: 16,
  backoffInitialMs: 500,
  backoffMaxMs: 30_000,
  initialWaitMs: 5_000,
};

export type ToolEvent =
  | { type: 'progress'; at: string; progress: number; total?: number; message?: string }
  | { type: 'log'; at: string; level: string; logger?: string; data: unknown };

export interface CallOptions {
  signal?: AbortSignal | undefined;
  /** Progress and log notifications of this call (secrets already scrubbed). */
  onEvent?: ((event: ToolEvent) => void) | undefined;
  /**
   * The call's time-out when the caller started it already (`callDeadline`): a call the hub moves
   * to a replacing connection keeps one budget. Without it the call starts its own.
   */
  deadline?: AbortSignal | undefined;
}

/** A call's time-out: aborts with a 504 after `limits.callTimeoutMs`. `clear()` when the call is over. */
export function callDeadline(server: string, action: string, limits: HubLimits): { signal: AbortSignal; clear(): void } {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new UpstreamTimeoutError(`${server}.${action} did not answer within ${limits.callTimeoutMs / 1000} s.`)),
    limits.callTimeoutMs,
  );
  return { signal: controller.signal, clear: () => clearTimeout(timer) };
}

/**
 * Thrown by a retired connection to a call it never sent: the caller (the hub) runs it on the
 * connection that replaced this one. A 502 should it ever escape.
 */
export class ConnectionSuperseded extends UpstreamError {
  constructor(server: string) {
    super(`${server}'s connection was replaced by one with new settings before the call was sent; retry.`);
  }
}

const STDERR_TAIL = 600;

/**
 * SDK error codes about an answer the server gave (the connection is fine); every other SDK error
 * (closed, not sent, an HTTP failure such as a lost session) means a reconnect is due.
 */
const ANSWER_REFUSED = new Set<string>(['INVALID_RESULT', 'UNSUPPORTED_RESULT_TYPE', 'INPUT_REQUIRED_ROUNDS_EXCEEDED', 'METHOD_NOT_SUPPORTED_BY_PROTOCOL_VERSION', 'CAPABILITY_NOT_SUPPORTED']);

/** The ConsentRequired a failure comes from: the SDK wraps what the transport threw (its era probe's error, say). */
function consentIn(err: unknown): ConsentRequired | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) if (e instanceof ConsentRequired) return e;
  return undefined;
}

function message(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

export class ServerConnection {
  status: ServerStatus = 'connecting';
  error: string | null = null;
  tools: Tool[] = [];
  /** Every value that must never leave this object: credentials and header values. */
  readonly secrets: string[];
  private client: Client | undefined;
  /** The client of the attempt under way, so close() can end a child that is still starting. */
  private starting: Client | undefined;
  private pending: Promise<void> | undefined;
  private begun = false;
  /** Why this connection is over: replaced by new settings, or its server removed (or the hub closed). */
  private ending: 'superseded' | 'removed' | null = null;
  /** Calls sent to the server and not answered yet: a retired connection closes once this is 0. */
  private inFlight = 0;
  /** Set by retire() while calls are in flight: resolves its wait for the last one. */
  private afterLastCall: (() => void) | undefined;
  private ended: Promise<void> | undefined;
  private generation = 0;
  private failures = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private nextAttemptAt = 0;
  private readonly gate: CallGate;
  private readonly logListeners = new Set<(params: { level: string; logger?: string | undefined; data?: unknown }) => void>();
  private stderrTail = '';
  /** The server answered the era probe as a 2025-era server: reconnects skip the probe. */
  private legacy = false;
  /** Set while the server waits for an admin's consent: what its calls fail with. */
  private consent: ConsentRequired | undefined;
  private readonly progressListeners = new Map<string, (params: { progress: number; total?: number | undefined; message?: string | undefined }) => void>();
  private progressTokens = 0;

  constructor(
    readonly spec: ServerSpec,
    private readonly limits: HubLimits,
    private readonly guard: AddressGuardOptions,
    private readonly logger: Logger,
  ) {
    this.secrets = secretValues(spec.secrets);
    this.gate = new CallGate(spec.name, limits.maxConcurrent, limits.maxQueued);
  }

  private get closed(): boolean {
    return this.ending !== null;
  }

  /** Starts connecting unless connected or already trying; resolves when that attempt settles. */
  connect(): Promise<void> {
    if (this.closed || this.status === 'connected') return Promise.resolve();
    this.begun = true;
    this.pending ??= this.attempt().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  /** Connects if never tried, then waits at most `ms` for the attempt under way. */
  async settle(ms: number): Promise<void> {
    if (!this.begun || (this.status === 'error' && !this.pending && Date.now() >= this.nextAttemptAt)) void this.connect();
    if (!this.pending) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.pending, new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
    clearTimeout(timer);
  }

  /** True once a connection was attempted. */
  get started(): boolean {
    return this.begun;
  }

  /** Its tools, connecting first when needed; 502 when it cannot be reached. */
  async toolList(signal: AbortSignal = new AbortController().signal): Promise<Tool[]> {
    await this.ready(signal);
    return this.tools;
  }

  /**
   * Calls one tool. Throws 503 over the queue bound, 504 after the time-out, 502 when unreachable or
   * removed, and ConnectionSuperseded when this connection was retired before the call was sent.
   */
  async call(action: string, args: Record<string, unknown>, options: CallOptions = {}): Promise<CallToolResult> {
    const own = options.deadline ? undefined : callDeadline(this.spec.name, action, this.limits);
    const deadline = options.deadline ?? own!.signal;
    const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
    const progressToken = `p${++this.progressTokens}`;
    const onLog = options.onEvent
      ? (p: { level: string; logger?: string | undefined; data?: unknown }) =>
          options.onEvent!(scrub({ type: 'log', at: new Date().toISOString(), level: p.level, ...(p.logger ? { logger: p.logger } : {}), data: p.data ?? null }, this.secrets))
      : undefined;
    try {
      // Before queueing: a retired gate only lets waiters through when a call in flight ends.
      this.assertOpen();
      await this.gate.acquire(signal);
      let sent = false;
      try {
        const client = await this.ready(signal);
        // Retired while `ready` resumed: this call was not sent, it belongs on the replacing connection.
        this.assertOpen();
        this.inFlight++;
        sent = true;
        if (onLog) this.logListeners.add(onLog);
        if (options.onEvent) {
          const onEvent = options.onEvent;
          this.progressListeners.set(progressToken, (p) =>
            onEvent(scrub({ type: 'progress', at: new Date().toISOString(), progress: p.progress, ...(p.total !== undefined ? { total: p.total } : {}), ...(p.message !== undefined ? { message: p.message } : {}) }, this.secrets)),
          );
        }
        // Our own progress token, not the SDK's `onprogress`: the SDK looks its handler up after the
        // response may already have removed it, and loses notifications that arrive with the answer.
        const result = await client.callTool(
          { name: action, arguments: args, ...(options.onEvent ? { _meta: { progressToken } } : {}) },
          // Our own deadline above decides; the SDK's must not fire first.
          { signal, timeout: this.limits.callTimeoutMs + 60_000 },
        );
        return scrub(result as CallToolResult, this.secrets);
      } finally {
        if (onLog) this.logListeners.delete(onLog);
        this.progressListeners.delete(progressToken);
        this.gate.release();
        if (sent && --this.inFlight === 0) this.afterLastCall?.();
      }
    } catch (err) {
      throw this.callError(err, action, options.signal, deadline);
    } finally {
      own?.clear();
    }
  }

  /**
   * Replaced by a connection with new settings: calls not sent yet (queued, or waiting for the
   * connection) fail with ConnectionSuperseded so the hub moves them to the new connection; calls
   * already sent finish here, and then the client closes (ending a stdio child). Resolves once closed.
   */
  retire(): Promise<void> {
    if (this.ending) return this.ended ?? Promise.resolve();
    this.ending = 'superseded';
    this.error = 'Replaced by a connection with new settings.';
    this.stopTrying();
    this.gate.drain();
    const ended = this.inFlight === 0 ? this.shutDown() : new Promise<void>((resolve) => (this.afterLastCall = resolve)).then(() => this.shutDown());
    this.ended = ended;
    return ended;
  }

  /** Stops for good, failing every call, sent or not (the server was removed, or the hub closes). */
  async close(): Promise<void> {
    this.ending = 'removed';
    this.error = 'The server was removed.';
    this.stopTrying();
    this.gate.drain();
    this.afterLastCall?.();
    await this.shutDown();
  }

  /** No reconnect from now on; an attempt under way is abandoned. */
  private stopTrying(): void {
    this.generation++;
    clearTimeout(this.retryTimer);
    this.nextAttemptAt = Number.POSITIVE_INFINITY;
  }

  /** Closes the clients, which ends (then kills) a stdio child. */
  private async shutDown(): Promise<void> {
    const client = this.client;
    const starting = this.starting;
    this.client = undefined;
    this.starting = undefined;
    this.status = 'error';
    this.tools = [];
    await Promise.all([client?.close().catch(() => {}), starting?.close().catch(() => {})]);
  }

  /** Throws for a call that has not been sent when this connection has ended. */
  private assertOpen(): void {
    if (this.ending === 'superseded') throw new ConnectionSuperseded(this.spec.name);
    if (this.ending === 'removed') throw new UpstreamError(`${this.spec.name} was removed.`);
  }

  private callError(err: unknown, action: string, callerSignal: AbortSignal | undefined, timeoutSignal: AbortSignal): unknown {
    if (callerSignal?.aborted) return callerSignal.reason;
    if (timeoutSignal.aborted) return timeoutSignal.reason;
    const consent = consentIn(err);
    if (consent) {
      if (consent.kind === 'sign-in') this.needsConsent(consent);
      return consent;
    }
    if (err instanceof UnavailableError || err instanceof UpstreamError || err instanceof UpstreamTimeoutError) return err;
    const name = this.spec.name;
    // close() ended the transport under a call that was sent: the server was removed, not lost.
    if (this.ending === 'removed') return new UpstreamError(`${name} was removed.`);
    const text = scrubText(message(err), this.secrets);
    // These errors come from a client, so the SDK is loaded by then.
    const sdk = loadedSdk?.client;
    if (sdk && err instanceof sdk.SdkError && err.code === sdk.SdkErrorCode.RequestTimeout) return new UpstreamTimeoutError(`${name}.${action} timed out: ${text}`);
    // The server answered with an error (or an answer this client cannot use): the connection is fine.
    if (sdk && (err instanceof sdk.ProtocolError || (err instanceof sdk.SdkError && ANSWER_REFUSED.has(err.code)))) return new UpstreamError(`${name} refused the call to ${action}: ${text}`);
    // The transport failed: the child died or the http session is gone. Start over.
    this.dropped(this.client, `lost the connection (${text})`);
    return new UpstreamError(`${name} is unreachable: ${text}`);
  }

  private async ready(signal: AbortSignal): Promise<Client> {
    const unreachable = () => new UpstreamError(`${this.spec.name} is unreachable: ${this.error ?? 'not connected'}`);
    this.assertOpen();
    if (this.status === 'connected' && this.client) return this.client;
    if (this.status === 'needs_consent' && this.consent) throw this.consent;
    if (!this.pending && this.status === 'error' && this.begun && Date.now() < this.nextAttemptAt) throw unreachable();
    const attempt = this.connect();
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      void attempt.then(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      });
    });
    this.assertOpen();
    if (this.status !== 'connected' || !this.client) throw unreachable();
    return this.client;
  }

  private async attempt(): Promise<void> {
    clearTimeout(this.retryTimer);
    const generation = ++this.generation;
    this.status = 'connecting';
    if (this.spec.refused) {
      this.fail(this.spec.refused, false);
      return;
    }
    let sdk: ClientSdk;
    try {
      sdk = await loadClientSdk();
    } catch (err) {
      if (generation === this.generation && !this.closed) this.fail(`Could not connect: ${message(err)}`, true);
      return;
    }
    if (generation !== this.generation || this.closed) return;
    const client = new sdk.client.Client(
      { name: 'switchboard', version: '0.1.0' },
      {
        capabilities: {},
        // Both eras: `server/discover` first, the 2025 `initialize` when the server does not know it.
        versionNegotiation: { mode: 'auto' },
        listMaxPages: sdk.transports.MAX_TOOL_PAGES,
        listChanged: {
          tools: {
            debounceMs: 50,
            onChanged: (error, tools) => {
              if (generation === this.generation && !error && tools) this.tools = tools;
            },
          },
        },
      },
    );
    client.setNotificationHandler('notifications/progress', (n) => {
      this.progressListeners.get(String(n.params.progressToken))?.(n.params);
    });
    client.setNotificationHandler('notifications/message', (n) => {
      for (const listener of this.logListeners) listener(n.params);
    });
    client.onclose = () => this.dropped(client, this.spec.transport === 'stdio' ? 'the process exited' : 'the session closed');
    client.onerror = (err) => this.logger.debug({ server: this.spec.name, error: scrubText(message(err), this.secrets) }, 'tool server transport error');
    this.starting = client;
    try {
      await client.connect(
        sdk.transports.createTransport(this.spec, this.guard, (chunk) => {
          this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL * 2);
        }),
        // A server found to be of the 2025 era is not probed again on a reconnect (a stdio probe
        // costs a short-lived second process).
        { timeout: this.limits.connectTimeoutMs, ...(this.legacy ? { prior: { kind: 'legacy' as const } } : {}) },
      );
      this.legacy = client.getProtocolEra() === 'legacy';
      const tools = await sdk.transports.listAllTools(client, this.limits.connectTimeoutMs);
      if (generation !== this.generation || this.closed) {
        await client.close().catch(() => {});
        return;
      }
      this.client = client;
      this.tools = tools;
      this.status = 'connected';
      this.error = null;
      this.failures = 0;
      this.logger.info({ server: this.spec.name, tools: tools.length }, 'tool server connected');
    } catch (err) {
      await client.close().catch(() => {});
      if (generation !== this.generation || this.closed) return;
      const consent = consentIn(err);
      if (consent?.kind === 'sign-in') this.needsConsent(consent);
      else this.fail(`Could not connect: ${message(err)}`, true);
    } finally {
      if (this.starting === client) this.starting = undefined;
    }
  }

  /**
   * The server wants an admin's consent: no call is sent and no reconnect tried until the sign-in
   * changes, which replaces this connection (tool-oauth.ts).
   */
  private needsConsent(err: ConsentRequired): void {
    const client = this.client;
    this.client = undefined;
    this.generation++;
    if (client) void client.close().catch(() => {});
    clearTimeout(this.retryTimer);
    this.consent = err;
    this.status = 'needs_consent';
    this.tools = [];
    this.error = scrubText(err.message, this.secrets);
    this.nextAttemptAt = Number.POSITIVE_INFINITY;
    this.logger.info({ server: this.spec.name }, 'tool server needs consent');
  }

  /** The live client went away (crash, closed session): reconnect with back-off. */
  private dropped(client: Client | undefined, why: string): void {
    if (this.closed || !client || client !== this.client) return;
    this.client = undefined;
    this.generation++;
    void client.close().catch(() => {});
    this.fail(`Disconnected: ${why}`, true);
  }

  private fail(reason: string, retry: boolean): void {
    const tail = this.stderrTail.trim();
    this.stderrTail = '';
    this.status = 'error';
    this.tools = [];
    this.error = scrubText(tail ? `${reason} (stderr: ${tail.slice(-STDERR_TAIL)})` : reason, this.secrets);
    if (!retry || this.closed) {
      this.nextAttemptAt = Number.POSITIVE_INFINITY;
      return;
    }
    this.failures++;
    const delay = Math.min(this.limits.backoffMaxMs, this.limits.backoffInitialMs * 2 ** (this.failures - 1));
    this.nextAttemptAt = Date.now() + delay;
    this.retryTimer = setTimeout(() => void this.connect(), delay);
    this.retryTimer.unref();
    this.logger.warn({ server: this.spec.name, error: this.error, retryInMs: delay }, 'tool server unavailable');
  }
}
