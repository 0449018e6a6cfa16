// Source that vitest runs one way and tsc emits another (issue 40). tsc drops the parentheses of a
// type assertion after `new`: `new (require('ajv') as typeof import('ajv')).Ajv(o)` is emitted as
// `new require('ajv').Ajv(o)`, which calls the class without `new` on the built server, while
// vitest's transform keeps them and every test passes. Take the value out first, then `new` it.
// (TypeScript 7.0.2 does the same with `satisfies` and `<T>x`; it keeps them around `x!`.)
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** `new (<T>` or `new (` … ` as ` / ` satisfies ` … `)`, the inner expression holding calls one level deep. */
const NEW_OF_ASSERTION = /\bnew\s*\((?:\s*<[\w.]+>|(?:[^()]|\([^()]*\))*?\s(?:as|satisfies)\s)/g;

function sources(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => path.join(dir, f));
}

describe('emit hazards', () => {
  it('finds the pattern it looks for', () => {
    expect("new (require('ajv') as typeof import('ajv')).Ajv(OPTIONS)".match(NEW_OF_ASSERTION)).toHaveLength(1);
    expect('const { Ajv } = require(\'ajv\') as typeof import(\'ajv\'); new Ajv(OPTIONS)'.match(NEW_OF_ASSERTION)).toBeNull();
    expect('new (f() satisfies Factory).Y()'.match(NEW_OF_ASSERTION)).toHaveLength(1);
    expect('new (<Factory>f()).Y()'.match(NEW_OF_ASSERTION)).toHaveLength(1);
    expect('Module: new (bytes: Uint8Array) => object;'.match(NEW_OF_ASSERTION)).toBeNull();
  });

  it('no `new (x as T)` in src/ or bridges/', () => {
    const found = [...sources('src'), ...sources('bridges')].flatMap((file) => {
      const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
      const lines = text.split('\n');
      return [...text.matchAll(NEW_OF_ASSERTION)]
        .map((m) => text.slice(0, m.index).split('\n').length)
        .filter((line) => !/^\s*(\/\/|\*)/.test(lines[line - 1]!)) // comments may show the pattern
        .map((line) => `${file}:${line}: ${lines[line - 1]!.trim()}`);
    });
    expect(found).toEqual([]);
  });
});
