/**
 * The one address guard (DESIGN.md "One address guard"): every outbound URL a user can name — knowledge
 * URLs, http tool servers, webhook deliveries — is resolved and vetted here, and the socket then
 * connects to the vetted address itself through `pinnedLookup` (DNS rebinding cannot swap it).
 */
import { promises as dns, type LookupAddress } from 'node:dns';
import { BlockList, isIP, isIPv4, isIPv6, type LookupFunction } from 'node:net';
import { ValidationError } from '../errors.js';

export type LookupFn = (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

/** What the guard needs to decide; URL fetching and the tool hub extend it. */
export interface AddressGuardOptions {
  /** SWITCHBOARD_ALLOW_PRIVATE_URLS: when true, nothing is refused for its address. */
  allowPrivate: boolean;
  /** Injectable for tests; default `dns.promises.lookup(host, { all: true, verbatim: true })`. */
  lookup?: LookupFn;
  /** Injectable for tests; default `!isBlockedAddress(address)`. Ignored when allowPrivate is true. */
  isAllowedAddress?: (address: string) => boolean;
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
export class Refusal extends Error {
  constructor(
    message: string,
    readonly short: string,
  ) {
    super(message);
  }
}

const PUBLIC_ONLY = 'URLs must point to the public internet';

export interface Target {
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
export async function checkTarget(url: URL, options: AddressGuardOptions): Promise<Target> {
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

function refusedLabel(address: string, options: AddressGuardOptions): string | null {
  const allowed = options.isAllowedAddress ? options.isAllowedAddress(address) : !isBlockedAddress(address);
  return allowed ? null : (classifyAddress(address) ?? 'disallowed address');
}

/**
 * Checks a URL before anything is fetched: http(s) only, no userinfo, a host, a valid port, and —
 * unless allowPrivate — no local host name and no blocked address among everything the host
 * resolves to. Every refusal is `ValidationError.field(field, why)`. Returns the parsed URL.
 */
export async function assertPublicUrl(url: string, options: AddressGuardOptions, field = 'url'): Promise<URL> {
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
// Connecting

/** Hands the already-vetted addresses to net.connect instead of asking DNS again. */
export function pinnedLookup(addresses: Target['addresses']): LookupFunction {
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
