import { promises as dns, type LookupAddress } from 'node:dns';
import { STATUS_CODES, request as httpRequest, type ClientRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, isIPv4, isIPv6, type LookupFunction } from 'node:net';
import type { Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate, createInflateRaw } from 'node:zlib';
import { ValidationError } from '../../errors.js';

export type LookupFn = (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

export interface UrlFetchOptions {
  /** SWITCHBOARD_ALLOW_PRIVATE_URLS: when true, nothing is refused for its address. */
  allowPrivate: boolean;
  /** Largest body accepted (bytes), counted both as sent and after decompression. */
  maxBytes: number;
  /** Whole-fetch deadline in ms, redirects included (default 15_000); also a connect/idle timeout. */
  timeoutMs?: number;
  /** Default 5. */
  maxRedirects?: number;
  /** Injectable for tests; default `dns.promises.lookup(host, { all: true, verbatim: true })`. */
  lookup?: LookupFn;
  /** Injectable for tests; default `!isBlockedAddress(address)`. Ignored when allowPrivate is true. */
  isAllowedAddress?: (address: string) => boolean;
  signal?: AbortSignal;
  /** Sent as User-Agent; default "Switchboard/0.1 (+knowledge ingestion)". */
  userAgent?: string;
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
// Addresses

const RANGES: Array<[label: string, family: 'ipv4' | 'ipv6', network: string, prefix: number]> = [
  ['unspecified address', 'ipv4', '0.0.0.0', 8],
  ['private address', 'ipv4', '10.0.0.0', 8],
  ['carrier-grade NAT address', 'ipv4', '100.64.0.0', 10],
  ['loopback address', 'ipv4', '127.0.0.0', 8],
  ['link-local address', 'ipv4', '169.254.0.0', 16],
  ['private address', 'ipv4', '172.16.0.0', 12],
  ['reserved address', 'ipv4', '192.0.0.0', 24],
  ['documentation address', 'ipv4', '192.0.2.0', 24],
  ['private address', 'ipv4', '192.168.0.0', 16],
  ['benchmarking address', 'ipv4', '198.18.0.0', 15],
  ['documentation address', 'ipv4', '198.51.100.0', 24],
  ['documentation address', 'ipv4', '203.0.113.0', 24],
  ['multicast address', 'ipv4', '224.0.0.0', 4],
  ['reserved address', 'ipv4', '240.0.0.0', 4], // includes 255.255.255.255
  ['unspecified address', 'ipv6', '::', 128],
  ['loopback address', 'ipv6', '::1', 128],
  ['private address', 'ipv6', 'fc00::', 7], // unique local, incl. fd00:ec2::254 (AWS metadata)
  ['link-local address', 'ipv6', 'fe80::', 10],
  ['site-local address', 'ipv6', 'fec0::', 10], // deprecated, still routed inside some networks
  ['multicast address', 'ipv6', 'ff00::', 8],
  ['documentation address', 'ipv6', '2001:db8::', 32],
];

const BLOCK_LISTS = new Map<string, BlockList>();
for (const [label, family, network, prefix] of RANGES) {
  let list = BLOCK_LISTS.get(label);
  if (!list) BLOCK_LISTS.set(label, (list = new BlockList()));
  list.addSubnet(network, prefix, family);
}

function matchRanges(address: string, family: 'ipv4' | 'ipv6'): string | null {
  for (const [label, list] of BLOCK_LISTS) if (list.check(address, family)) return label;
  return null;
}

/** Sixteen bytes of a valid IPv6 address (zone already removed). */
function ipv6Bytes(address: string): number[] {
  let text = address;
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const [a = 0, b = 0, c = 0, d = 0] = tail.split('.').map(Number);
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  const groups = (part: string | undefined): string[] => (part ? part.split(':') : []);
  const head = groups(halves[0]);
  const rest = groups(halves[1]);
  const all = [...head, ...Array<string>(8 - head.length - rest.length).fill('0'), ...rest];
  return all.flatMap((group) => {
    const value = Number.parseInt(group, 16);
    return [value >> 8, value & 0xff];
  });
}

/** The IPv4 address carried by a mapped, translated, compatible or NAT64 IPv6 address. */
function embeddedIPv4(bytes: number[]): string | null {
  const zero = (from: number, to: number): boolean => bytes.slice(from, to).every((b) => b === 0);
  const mapped = zero(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff; // ::ffff:a.b.c.d
  const translated = zero(0, 8) && bytes[8] === 0xff && bytes[9] === 0xff && zero(10, 12); // ::ffff:0:a.b.c.d
  const compatible = zero(0, 12); // ::a.b.c.d
  const nat64 = bytes[0] === 0 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b && zero(4, 12);
  return mapped || translated || compatible || nat64 ? bytes.slice(12).join('.') : null;
}

/** Why an address must not be contacted ("loopback address"...), or null for a public one. */
function classifyAddress(input: string): string | null {
  const bracketed = input.startsWith('[') && input.endsWith(']');
  let address = bracketed ? input.slice(1, -1) : input;
  if (!bracketed && isIPv4(address)) return matchRanges(address, 'ipv4');
  if (!isIPv6(address)) return 'invalid address';
  address = address.split('%')[0] ?? '';
  if (!isIPv6(address)) return 'invalid address';
  const direct = matchRanges(address, 'ipv6');
  if (direct) return direct;
  const v4 = embeddedIPv4(ipv6Bytes(address));
  return v4 ? matchRanges(v4, 'ipv4') : null;
}

/** True for every address a server-side fetch must not reach (see API.md §4); unparseable → true. */
export function isBlockedAddress(address: string): boolean {
  return classifyAddress(address) !== null;
}

// ---------------------------------------------------------------------------------------------
// Checking a URL

/** Why a URL may not be fetched: `message` completes "url: ...", `short` completes "refused: ...". */
class Refusal extends Error {
  constructor(
    message: string,
    readonly short: string,
  ) {
    super(message);
  }
}

const PUBLIC_ONLY = 'URLs must point to the public internet';

interface Target {
  url: URL;
  /** Hostname without brackets, as used for Host, SNI and connecting. */
  host: string;
  /** Every address the host resolved to, all vetted. */
  addresses: Array<{ address: string; family: 4 | 6 }>;
}

const defaultLookup: LookupFn = async (hostname) => {
  const answers: LookupAddress[] = await dns.lookup(hostname, { all: true, verbatim: true });
  return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

const article = (label: string): string => (/^[aeiou]/.test(label) ? `an ${label}` : `a ${label}`);

/** Scheme, userinfo, host, port, then every resolved address; throws a Refusal. */
async function checkTarget(url: URL, options: UrlFetchOptions): Promise<Target> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new Refusal(`must be an http or https URL, not ${url.protocol}`, 'not an http or https URL');
  }
  if (url.username || url.password) {
    throw new Refusal('must not contain a user name or password', 'the URL contains a user name or password');
  }
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (!host) throw new Refusal('must have a host', 'no host');
  if (url.port !== '' && !(Number(url.port) >= 1 && Number(url.port) <= 65535)) {
    throw new Refusal(`has an invalid port (${url.port})`, `invalid port (${url.port})`);
  }
  const family = isIP(host);
  if (family !== 0) {
    const target: Target = { url, host, addresses: [{ address: host, family: family === 6 ? 6 : 4 }] };
    const label = options.allowPrivate ? null : refusedLabel(host, options);
    if (label) throw new Refusal(`points to ${article(label)} (${host}); ${PUBLIC_ONLY}`, label);
    return target;
  }
  const name = host.toLowerCase().replace(/\.+$/, '');
  const localName = name === 'localhost' || /\.(localhost|local|internal)$/.test(name);
  if (localName && !options.allowPrivate) {
    throw new Refusal(`points to a local host name (${host}); ${PUBLIC_ONLY}`, `local host name (${host})`);
  }
  let addresses: Array<{ address: string; family: 4 | 6 }>;
  try {
    addresses = await (options.lookup ?? defaultLookup)(host);
  } catch {
    addresses = [];
  }
  if (addresses.length === 0) {
    throw new Refusal(`host ${host} does not resolve`, `host ${host} does not resolve`);
  }
  if (!options.allowPrivate) {
    for (const { address } of addresses) {
      const label = refusedLabel(address, options);
      if (label) {
        throw new Refusal(
          `resolves to ${article(label)} (${address}); ${PUBLIC_ONLY}`,
          `${host} resolves to ${article(label)} (${address})`,
        );
      }
    }
  }
  return { url, host, addresses };
}

function refusedLabel(address: string, options: UrlFetchOptions): string | null {
  const allowed = options.isAllowedAddress ? options.isAllowedAddress(address) : !isBlockedAddress(address);
  return allowed ? null : (classifyAddress(address) ?? 'disallowed address');
}

/**
 * Checks a URL before anything is fetched: http(s) only, no userinfo, a host, a valid port, and —
 * unless allowPrivate — no local host name and no blocked address among everything the host
 * resolves to. Every refusal is `ValidationError.field(field, why)`. Returns the parsed URL.
 */
export async function assertPublicUrl(url: string, options: UrlFetchOptions, field = 'url'): Promise<URL> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw ValidationError.field(field, 'is not a valid URL');
  }
  try {
    await checkTarget(parsed, options);
  } catch (error) {
    if (error instanceof Refusal) throw ValidationError.field(field, error.message);
    throw error;
  }
  return parsed;
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

/** Hands the already-vetted addresses to net.connect instead of asking DNS again. */
function pinnedLookup(addresses: Target['addresses']): LookupFunction {
  return (_hostname, lookupOptions, callback) => {
    const family = lookupOptions.family === 'IPv4' ? 4 : lookupOptions.family === 'IPv6' ? 6 : lookupOptions.family;
    const usable = family === 4 || family === 6 ? addresses.filter((a) => a.family === family) : addresses;
    process.nextTick(() => {
      const first = usable[0];
      if (!first) {
        const error: NodeJS.ErrnoException = new Error('No vetted address of the requested family');
        error.code = 'ENOTFOUND';
        callback(error, '');
      } else if (lookupOptions.all) {
        callback(null, usable.map((a) => ({ address: a.address, family: a.family })));
      } else {
        callback(null, first.address, first.family);
      }
    });
  };
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
    try {
      req = (https ? httpsRequest : httpRequest)(requestOptions);
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
        const reason = STATUS_CODES[status] ?? response.statusMessage?.slice(0, 60) ?? '';
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
