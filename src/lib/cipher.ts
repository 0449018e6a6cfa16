import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** AES-256-GCM for data at rest: idempotent responses now, channel and MCP credentials later. */
export interface Cipher {
  /** Returns `v1.<iv>.<tag>.<ciphertext>` (base64url parts). `context` is bound as associated data. */
  encrypt(plaintext: string, context?: string): string;
  /** Throws when the text was tampered with, or encrypted under another key or context. */
  decrypt(sealed: string, context?: string): string;
}

export function createCipher(key: Buffer): Cipher {
  if (key.length !== 32) throw new Error('The encryption key must be 32 bytes.');
  return {
    encrypt(plaintext, context = '') {
      const iv = crypto.randomBytes(12);
      const c = crypto.createCipheriv('aes-256-gcm', key, iv);
      c.setAAD(Buffer.from(context));
      const ct = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
      return ['v1', iv, c.getAuthTag(), ct].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
    },
    decrypt(sealed, context = '') {
      const [version, iv, tag, ct] = sealed.split('.');
      if (version !== 'v1' || iv === undefined || tag === undefined || ct === undefined) {
        throw new Error('Not an encrypted value of this service.');
      }
      const d = crypto.createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      d.setAAD(Buffer.from(context));
      d.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([d.update(Buffer.from(ct, 'base64url')), d.final()]).toString('utf8');
    },
  };
}

export const SECRET_KEY_FILE = 'secret.key';

/**
 * The configured key, or the key file in the data directory, created (mode 0600) on first use.
 * Losing the file makes stored credentials unreadable, so it is never overwritten.
 */
export function loadSecretKey(configured: Buffer | undefined, dataDir: string): Buffer {
  if (configured) return configured;
  const file = path.join(dataDir, SECRET_KEY_FILE);
  fs.mkdirSync(dataDir, { recursive: true });
  try {
    fs.writeFileSync(file, crypto.randomBytes(32).toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const key = Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64');
  if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte base64 key.`);
  return key;
}
