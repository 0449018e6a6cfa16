/**
 * Passwords (API.md §14): scrypt from node:crypto, memory-hard, with a per-user salt and the
 * parameters stored beside the hash (`scrypt$N$r$p$salt$hash`, base64url), so they can be raised
 * later without invalidating what is stored. Hashing runs on libuv's thread pool, off the event loop.
 */
import crypto from 'node:crypto';

export interface ScryptParams {
  /** CPU/memory cost, a power of two. */
  N: number;
  r: number;
  p: number;
}

/** OWASP's recommendation for scrypt: N = 2^17, r = 8, p = 1 (128 MiB, ~0.2–0.4 s of one core). */
export const DEFAULT_SCRYPT: ScryptParams = { N: 2 ** 17, r: 8, p: 1 };

export const MIN_PASSWORD_LENGTH = 12;
export const MAX_PASSWORD_LENGTH = 1024;
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;

function derive(password: string, salt: Buffer, { N, r, p }: ScryptParams): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // maxmem above the 128·N·r the parameters need (Node's default, 32 MiB, refuses N = 2^17).
    crypto.scrypt(password.normalize('NFKC'), salt, KEY_LENGTH, { N, r, p, maxmem: 256 * N * r + 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

/** The stored form of a new password. */
export async function hashPassword(password: string, params: ScryptParams = DEFAULT_SCRYPT): Promise<string> {
  const salt = crypto.randomBytes(SALT_LENGTH);
  const key = await derive(password, salt, params);
  return `scrypt$${params.N}$${params.r}$${params.p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

const STORED = /^scrypt\$(\d+)\$(\d+)\$(\d+)\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)$/;

/**
 * Whether `password` matches `stored`. With `stored` null (an unknown e-mail, a user without a
 * password), a hash is still computed, so the answer takes as long as for a wrong password.
 */
export async function verifyPassword(password: string, stored: string | null, params: ScryptParams = DEFAULT_SCRYPT): Promise<boolean> {
  const m = stored === null ? null : STORED.exec(stored);
  if (!m) {
    await derive(password, Buffer.alloc(SALT_LENGTH), params);
    return false;
  }
  const [, N, r, p, salt, hash] = m as unknown as [string, string, string, string, string, string];
  const expected = Buffer.from(hash, 'base64url');
  const key = await derive(password, Buffer.from(salt, 'base64url'), { N: Number(N), r: Number(r), p: Number(p) });
  return key.length === expected.length && crypto.timingSafeEqual(key, expected);
}
