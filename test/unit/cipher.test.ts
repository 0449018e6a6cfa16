import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createCipher, loadSecretKey, SECRET_KEY_FILE } from '../../src/lib/cipher.js';
import { tempDir } from '../helpers/app.js';

describe('AES-256-GCM cipher', () => {
  const cipher = createCipher(crypto.randomBytes(32));

  it('round-trips, with a fresh IV each time', () => {
    const a = cipher.encrypt('sb_secret', 'ctx');
    const b = cipher.encrypt('sb_secret', 'ctx');
    expect(a).not.toBe(b);
    expect(a).not.toContain('sb_secret');
    expect(cipher.decrypt(a, 'ctx')).toBe('sb_secret');
  });

  it('refuses tampered text, another context and another key', () => {
    const sealed = cipher.encrypt('payload', 'ctx');
    const parts = sealed.split('.');
    const ct = Buffer.from(parts[3] as string, 'base64url');
    ct[0] = (ct[0] as number) ^ 1;
    expect(() => cipher.decrypt([parts[0], parts[1], parts[2], ct.toString('base64url')].join('.'), 'ctx')).toThrow();
    expect(() => cipher.decrypt(sealed, 'other')).toThrow();
    expect(() => createCipher(crypto.randomBytes(32)).decrypt(sealed, 'ctx')).toThrow();
    expect(() => cipher.decrypt('plain text', 'ctx')).toThrow();
  });
});

describe('secret key file', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });

  it('is created once with mode 0600 and then reused, never overwritten', () => {
    const dir = tempDir();
    dirs.push(dir);
    const first = loadSecretKey(undefined, dir);
    const file = path.join(dir, SECRET_KEY_FILE);
    expect(first).toHaveLength(32);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(loadSecretKey(undefined, dir)).toEqual(first);
  });

  it('is not used when SWITCHBOARD_SECRET is configured', () => {
    const dir = tempDir();
    dirs.push(dir);
    const configured = crypto.randomBytes(32);
    expect(loadSecretKey(configured, dir)).toBe(configured);
    expect(fs.existsSync(path.join(dir, SECRET_KEY_FILE))).toBe(false);
  });

  it('refuses a damaged key file instead of replacing it', () => {
    const dir = tempDir();
    dirs.push(dir);
    fs.writeFileSync(path.join(dir, SECRET_KEY_FILE), 'short\n', { mode: 0o600 });
    expect(() => loadSecretKey(undefined, dir)).toThrow(/32-byte/);
    expect(fs.readFileSync(path.join(dir, SECRET_KEY_FILE), 'utf8')).toBe('short\n');
  });
});
