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

export function hashKey(secret: string): string {
  return crypto.createHash('sha256').update(secret).digest('hex');
}

export function keyPrefix(secret: string): string {
  return secret.slice(0, PREFIX_LENGTH);
}
