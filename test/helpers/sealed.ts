/** The one "encrypted at rest" assertion (DESIGN.md: AES-256-GCM under SWITCHBOARD_SECRET or the key file). */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { SECRET_KEY_FILE } from '../../src/lib/cipher.js';
import type { TestApp } from './app.js';

/** `v1.<iv>.<tag>.<ciphertext>`, base64url: a 12-byte IV (16 characters), a 16-byte GCM tag (22). */
const SEALED = /^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]+$/;

/**
 * Asserts that `stored` is sealed — the format above, opening with AES-256-GCM under the service's
 * key and bound to `context` (the associated data, so a value copied to another row does not open) —
 * and returns the plaintext for the caller to check. It opens the value with node:crypto, not the
 * product's cipher, so plaintext, base64 or a value the product merely labels `v1.` all fail here.
 */
export function expectSealed(t: TestApp, stored: string, context: string): string {
  expect(stored).toMatch(SEALED);
  const [, iv, tag, ciphertext] = stored.split('.') as [string, string, string, string];
  const key = t.ctx.config.secret ?? Buffer.from(fs.readFileSync(path.join(t.ctx.config.dataDir, SECRET_KEY_FILE), 'utf8').trim(), 'base64');
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAAD(Buffer.from(context));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  let plaintext = '';
  expect(() => {
    plaintext = Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
  }, `does not open under the service key with context "${context}"`).not.toThrow();
  return plaintext;
}
