/**
 * The webhook bridge (API.md §9). Inbound messages are answered synchronously by the channels
 * route, so this bridge only delivers outbound: `send` POSTs a signed JSON body to the channel's
 * `outboundUrl` through the address guard, retrying 429 and 5xx with back-off (honouring
 * `Retry-After`). Signatures: `X-Switchboard-Signature: sha256=<hex HMAC-SHA256 of the raw body>`.
 */
import crypto from 'node:crypto';
import { ConflictError } from '../../src/errors.js';
import type { AddressGuardOptions } from '../../src/lib/address-guard.js';
import { guardedFetch } from '../../src/lib/guarded-fetch.js';
import type { ChannelBridge, OutboundMessage, ReplyWriter } from '../bridge.js';

export interface WebhookCredentials {
  secret: string;
  outboundUrl?: string | undefined;
}

export const SIGNATURE_HEADER = 'x-switchboard-signature';

/** `sha256=<hex>` of the body under the secret. */
export function signature(secret: string, body: string | Buffer): string {
  return `sha256=${crypto.createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** Constant-time check of a `sha256=<hex>` header against the body. */
export function verifySignature(secret: string, body: Buffer, header: string | undefined): boolean {
  if (typeof header !== 'string') return false;
  const expected = Buffer.from(signature(secret, body));
  const given = Buffer.from(header.trim());
  return given.length === expected.length && crypto.timingSafeEqual(given, expected);
}

export interface WebhookBridgeOptions {
  channelId: string;
  credentials: WebhookCredentials;
  guard: AddressGuardOptions;
  /** Deliveries tried at most this often (default 4) and each waits at most this long (default 10 s). */
  attempts?: number;
  timeoutMs?: number;
}

const MAX_RETRY_AFTER_MS = 30_000;

function retryAfterMs(header: string | null, attempt: number): number {
  const seconds = Number(header);
  if (header !== null && Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds * 1000, MAX_RETRY_AFTER_MS);
  const date = header ? Date.parse(header) : Number.NaN;
  if (Number.isFinite(date)) return Math.min(Math.max(0, date - Date.now()), MAX_RETRY_AFTER_MS);
  return Math.min(250 * 2 ** attempt, MAX_RETRY_AFTER_MS);
}

export function createWebhookBridge(options: WebhookBridgeOptions): ChannelBridge {
  const fetch = guardedFetch(options.guard);
  const attempts = options.attempts ?? 4;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const { secret, outboundUrl } = options.credentials;

  async function deliver(payload: Record<string, unknown>): Promise<void> {
    if (!outboundUrl) throw new ConflictError(`Webhook channel ${options.channelId} has no outboundUrl to deliver to.`);
    const body = JSON.stringify(payload);
    for (let attempt = 0; ; attempt++) {
      let res: Response | undefined;
      let failure: string;
      try {
        res = await fetch(outboundUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json', [SIGNATURE_HEADER]: signature(secret, body) },
          body,
          signal: AbortSignal.timeout(timeoutMs),
        });
        await res.body?.cancel();
        if (res.ok) return;
        failure = `the endpoint answered ${res.status}`;
        if (res.status !== 429 && res.status < 500) throw new Error(failure);
      } catch (err) {
        if (res && !res.ok && res.status !== 429 && res.status < 500) throw err;
        failure = res ? `the endpoint answered ${res.status}` : (err as Error).message;
      }
      if (attempt + 1 >= attempts) throw new Error(`Webhook delivery failed after ${attempts} attempts: ${failure}`);
      await new Promise((r) => setTimeout(r, retryAfterMs(res?.headers.get('retry-after') ?? null, attempt)));
    }
  }

  return {
    async start() {},
    async stop() {},
    async send(message: OutboundMessage) {
      const id = crypto.randomUUID();
      await deliver({ id, channelId: options.channelId, conversationId: message.to, threadId: message.threadId ?? null, priority: message.priority, message: message.text });
      return { externalId: id };
    },
    // Webhook replies travel back in the inbound request's response; nothing is posted.
    reply(): ReplyWriter {
      return { progress() {}, finish: async () => [], fail: async () => {} };
    },
  };
}
