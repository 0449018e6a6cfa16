import crypto from 'node:crypto';
import { randomBase62 } from '../../lib/ids.js';

export const SCOPES = ['read', 'write', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

const RANK: Record<Scope, number> = { read: 1, write: 2, admin: 3 };

/** `admin` implies `write`, which implies `read`. */
export function hasScope(granted: readonly Scope[], needed: Scope): boolean {
  return granted.some((s) => RANK[s] >= RANK[needed]);
}

export const KEY_PATTERN = /^sb_[0-9A-Za-z]{40}$/;
export const PREFIX_LENGTH = 10;

export function generateKeySecret(): string {
  return `sb_${randomBase62(40)}`;
}

/** SHA-256 in hex. The one-shot `crypto.hash` (Node ≥ 20.12) costs ~0.3 µs against ~1.4 µs for a Hash object; every request hashes its key. */
export function hashKey(secret: string): string {
  return crypto.hash('sha256', secret, 'hex');
}

export function keyPrefix(secret: string): string {
  return secret.slice(0, PREFIX_LENGTH);
}
