/**
 * A `fetch` for outbound requests to URLs users name (http tool servers, webhook deliveries): every
 * request's URL passes the address guard, and the socket connects to the vetted address only
 * (pinned lookup). Redirects are never followed: the 3xx goes back to the caller as is.
 */
import { isIP } from 'node:net';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type AddressGuardOptions, checkTarget, pinnedLookup, Refusal } from './address-guard.js';
import { toFetchResponse } from './fetch-response.js';
import { http, https as nodeHttps } from './node-http.js';


function bodyBytes(body: unknown): Buffer | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return Buffer.from(body);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof URLSearchParams) return Buffer.from(body.toString());
  throw new TypeError('Unsupported request body');
}


export function guardedFetch(options: AddressGuardOptions): FetchLike {
  return async (input, init = {}) => {
    const url = new URL(input instanceof URL ? input.href : String(input));
    const signal = init.signal ?? undefined;
    signal?.throwIfAborted();
    let target;
    try {
      target = await checkTarget(url, options);
    } catch (error) {
      if (error instanceof Refusal) throw new Error(`refused to connect: ${error.short}`);
      throw error;
    }
    signal?.throwIfAborted();
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const body = bodyBytes(init.body);
    if (body) headers['content-length'] = String(body.length);
    const https = url.protocol === 'https:';
    return new Promise<Response>((resolve, reject) => {
      const req = (https ? nodeHttps.request : http.request)({
        host: target.host,
        port: url.port ? Number(url.port) : https ? 443 : 80,
        path: `${url.pathname}${url.search}`,
        method: init.method ?? 'GET',
        headers,
        agent: false, // no pooled socket can bypass the pinned lookup
        lookup: pinnedLookup(target.addresses),
        ...(https && isIP(target.host) === 0 ? { servername: target.host } : {}),
      });
      const onAbort = (): void => {
        req.destroy(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      req.on('error', (error) => {
        signal?.removeEventListener('abort', onAbort);
        reject(error);
      });
      req.on('response', (res) => {
        // The body streams on; an abort after this point destroys the socket, which ends the stream.
        res.on('close', () => signal?.removeEventListener('abort', onAbort));
        resolve(toFetchResponse(res, init.method));
      });
      req.end(body);
    });
  };
}
