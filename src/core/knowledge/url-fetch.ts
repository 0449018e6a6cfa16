import type { ClientRequest, IncomingMessage, RequestOptions } from 'node:http';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import type { Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate, createInflateRaw } from 'node:zlib';
import { type AddressGuardOptions, checkTarget, pinnedLookup, Refusal, type Target } from '../../lib/address-guard.js';
import { http, https as nodeHttps } from '../../lib/node-http.js';

// The guard lives in src/lib/address-guard.ts; these names stay importable from here for the knowledge code.
export { assertPublicUrl, isBlockedAddress, type LookupFn } from '../../lib/address-guard.js';

export interface UrlFetchOptions extends AddressGuardOptions {
  /** Largest body accepted (bytes), counted both as sent and after decompression. */
  maxBytes: number;
  /** Whole-fetch deadline in ms, redirects included (default 15_000); also a connect/idle timeout. */
  timeoutMs?: number;
  /** Default 5. */
  maxRedirects?: number;
  signal?: AbortSignal;
  /** Sent as User-Agent; default "Switchboard/0.1 (+knowledge ingestion)". */
  userAgent?: string;
  /** Extra trusted CA certificates (PEM), added to Node's own (tests with a self-signed server). */
  extraCa?: string;
}

/** A failed fetch; the message is written for users (it becomes a knowledge source's `error`). */
export class UrlFetchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UrlFetchError';
  }
}

export interface FetchedDocument {
  /** The final URL after redirects. */
  url: string;
  /** Content-Type without parameters, lower-case, or null. */
  mediaType: string | null;
  /** charset parameter of Content-Type if any (lower-case). */
  charset: string | null;
  /** From Content-Disposition filename, else the last path segment of the final URL, else null. */
  filename: string | null;
  body: Buffer;
}

// ---------------------------------------------------------------------------------------------
// Fetching

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const ACCEPT =
  'text/html, application/xhtml+xml, application/pdf, text/markdown, text/plain, text/csv, application/json, ' +
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document, */*;q=0.5';
const DEFAULT_USER_AGENT = 'Switchboard/0.1 (+knowledge ingestion)';

type HopResult = { kind: 'redirect'; location: string } | { kind: 'document'; document: FetchedDocument };

const show = (url: string): string => (url.length > 200 ? `${url.slice(0, 200)}…` : url);
const seconds = (ms: number): string => `${ms / 1000} s`;

/**
 * GETs a URL with the guard applied at connect time: every hop is resolved and vetted, then the
 * socket connects to the vetted address itself (DNS rebinding cannot swap it). Follows up to
 * maxRedirects redirects, decompresses, caps size and time. Failures are UrlFetchErrors; an abort
 * rejects with the signal's reason.
 */
export async function fetchUrl(url: string, options: UrlFetchOptions): Promise<FetchedDocument> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const maxRedirects = options.maxRedirects ?? 5;
  options.signal?.throwIfAborted();

  let current: URL;
  try {
    current = new URL(url);
  } catch {
    throw new UrlFetchError(`Refused to fetch ${show(url)}: not a valid URL`);
  }
  let currentHost = current.hostname;
  const controller = new AbortController();
  const forwardAbort = (): void => controller.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', forwardAbort, { once: true });
  const deadline = setTimeout(
    () => controller.abort(new UrlFetchError(`${currentHost} did not answer within ${seconds(timeoutMs)}`)),
    timeoutMs,
  );
  try {
    for (let redirects = 0; ; redirects++) {
      currentHost = current.hostname;
      let target: Target;
      try {
        target = await abortable(checkTarget(current, options), controller.signal);
      } catch (error) {
        if (!(error instanceof Refusal)) throw error;
        throw new UrlFetchError(
          redirects === 0
            ? `Refused to fetch ${show(current.href)}: ${error.short}`
            : `Redirect to ${show(current.href)} refused: ${error.short}`,
        );
      }
      const outcome = await requestOnce(target, options, controller.signal, timeoutMs);
      if (outcome.kind === 'document') return outcome.document;
      let next: URL;
      try {
        next = new URL(outcome.location, current);
      } catch {
        throw new UrlFetchError(`Redirect to ${show(outcome.location)} refused: not a valid URL`);
      }
      if (redirects >= maxRedirects) {
        throw new UrlFetchError(`Redirect to ${show(next.href)} refused: too many redirects (more than ${maxRedirects})`);
      }
      current = next;
    }
  } finally {
    clearTimeout(deadline);
    options.signal?.removeEventListener('abort', forwardAbort);
  }
}

function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

function connectionError(host: string, error: NodeJS.ErrnoException): UrlFetchError {
  if (error.code === 'ECONNREFUSED') return new UrlFetchError(`Could not connect to ${host}: connection refused`);
  if (error.code === 'ECONNRESET') return new UrlFetchError(`The connection to ${host} was reset`);
  return new UrlFetchError(`Could not fetch from ${host}: ${error.message}`);
}

/** One GET to a vetted target; settles exactly once and destroys everything on failure. */
function requestOnce(target: Target, options: UrlFetchOptions, signal: AbortSignal, timeoutMs: number): Promise<HopResult> {
  const { url, host, addresses } = target;
  const { maxBytes } = options;
  return new Promise<HopResult>((resolve, reject) => {
    let req: ClientRequest | undefined;
    let res: IncomingMessage | undefined;
    let decoder: Transform | undefined;
    let settled = false;
    const teardown = (): void => {
      signal.removeEventListener('abort', onAbort);
      decoder?.destroy();
      res?.destroy();
      req?.destroy();
    };
    const fail = (error: unknown): void => {
      if (settled) return;
      settled = true;
      teardown();
      reject(error);
    };
    const succeed = (result: HopResult): void => {
      if (settled) return;
      settled = true;
      teardown();
      resolve(result);
    };
    const onAbort = (): void => fail(signal.reason);
    if (signal.aborted) return fail(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });

    const https = url.protocol === 'https:';
    const requestOptions: RequestOptions & { servername?: string } = {
      host,
      port: url.port ? Number(url.port) : https ? 443 : 80,
      path: `${url.pathname}${url.search}`,
      method: 'GET',
      headers: {
        'user-agent': options.userAgent ?? DEFAULT_USER_AGENT,
        accept: ACCEPT,
        'accept-encoding': 'gzip, deflate, br',
      },
      agent: false, // a fresh socket per hop: no pooled connection can bypass the pinned lookup
      lookup: pinnedLookup(addresses),
      timeout: timeoutMs,
    };
    if (https && isIP(host) === 0) requestOptions.servername = host;
    if (https && options.extraCa) (requestOptions as { ca?: string[] }).ca = [...rootCertificates, options.extraCa];
    try {
      req = (https ? nodeHttps.request : http.request)(requestOptions);
    } catch (error) {
      return fail(new UrlFetchError(`Could not fetch from ${host}: ${(error as Error).message}`));
    }
    req.on('timeout', () => fail(new UrlFetchError(`${host} did not answer within ${seconds(timeoutMs)}`)));
    req.on('error', (error: NodeJS.ErrnoException) => fail(connectionError(host, error)));
    req.on('response', (response) => {
      res = response;
      const status = response.statusCode ?? 0;
      const location = response.headers.location;
      if (REDIRECT_STATUSES.has(status) && location) return succeed({ kind: 'redirect', location });
      if (status < 200 || status > 299) {
        const reason = http.STATUS_CODES[status] ?? response.statusMessage?.slice(0, 60) ?? '';
        return fail(new UrlFetchError(`The server answered ${status} ${reason}`.trim()));
      }
      const tooLarge = (): UrlFetchError => new UrlFetchError(`The document is larger than ${maxBytes} bytes`);
      const declared = Number(response.headers['content-length']);
      if (Number.isFinite(declared) && declared > maxBytes) return fail(tooLarge());
      const encoding = (response.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
      if (!['identity', '', 'gzip', 'x-gzip', 'deflate', 'br'].includes(encoding)) {
        return fail(new UrlFetchError(`The server used an unsupported content encoding (${encoding.slice(0, 40)})`));
      }
      const compressed = encoding !== 'identity' && encoding !== '';

      const chunks: Buffer[] = [];
      let rawBytes = 0;
      let bodyBytes = 0;
      let ended = false;
      const accept = (chunk: Buffer): void => {
        bodyBytes += chunk.length;
        if (bodyBytes > maxBytes) return fail(tooLarge());
        chunks.push(chunk);
      };
      const done = (): void =>
        succeed({ kind: 'document', document: describeDocument(response, Buffer.concat(chunks), url) });
      const startDecoder = (first: Buffer): Transform => {
        // "deflate" is meant to be zlib-wrapped, but some servers send raw deflate.
        const zlibHeader = first.length < 2 || ((first[0]! & 0x0f) === 8 && ((first[0]! << 8) | first[1]!) % 31 === 0);
        const created =
          encoding === 'br'
            ? createBrotliDecompress()
            : encoding === 'deflate'
              ? zlibHeader
                ? createInflate()
                : createInflateRaw()
              : createGunzip();
        created.on('data', accept);
        created.on('error', () => fail(new UrlFetchError(`The document could not be decompressed (${encoding})`)));
        created.on('end', done);
        return created;
      };
      response.on('data', (chunk: Buffer) => {
        if (settled) return;
        rawBytes += chunk.length;
        if (rawBytes > maxBytes) return fail(tooLarge());
        if (!compressed) return accept(chunk);
        decoder ??= startDecoder(chunk);
        decoder.write(chunk);
      });
      response.on('end', () => {
        ended = true;
        if (decoder) decoder.end();
        else done();
      });
      response.on('close', () => {
        if (!ended) fail(new UrlFetchError(`The connection to ${host} closed before the document was complete`));
      });
      response.on('error', () => {
        if (!ended) fail(new UrlFetchError(`The connection to ${host} closed before the document was complete`));
      });
    });
    req.end();
  });
}

function describeDocument(response: IncomingMessage, body: Buffer, url: URL): FetchedDocument {
  const contentType = response.headers['content-type'] ?? '';
  const mediaType = contentType.split(';')[0]?.trim().toLowerCase() || null;
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType)?.[1]?.toLowerCase() ?? null;
  return {
    url: url.href,
    mediaType,
    charset,
    filename: dispositionFilename(response.headers['content-disposition']) ?? urlFilename(url),
    body,
  };
}

/** A bare file name: no directories, no control characters, never "." or "..". */
function cleanFilename(name: string): string | null {
  const base = (name.split(/[/\\]/).pop() ?? '').replace(/[\u0000-\u001f\u007f]/g, '').trim();
  return base && base !== '.' && base !== '..' ? base.slice(0, 255) : null;
}

function decode(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

function dispositionFilename(header: string | undefined): string | null {
  if (!header) return null;
  const extended = /filename\*\s*=\s*[^']*'[^']*'([^;\s]+)/i.exec(header)?.[1];
  const fromExtended = extended ? decode(extended) : null;
  if (fromExtended && cleanFilename(fromExtended)) return cleanFilename(fromExtended);
  const plain = /(?:^|;)\s*filename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]+))/i.exec(header);
  if (!plain) return null;
  return cleanFilename(plain[1]?.replace(/\\(.)/g, '$1') ?? plain[2] ?? '');
}

function urlFilename(url: URL): string | null {
  const segment = url.pathname.split('/').pop() ?? '';
  return segment ? cleanFilename(decode(segment) ?? segment) : null;
}
