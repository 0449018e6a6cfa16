import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createBinaryCoder } from '../../src/core/knowledge/binary-code.js';
import { hashedVector } from '../../src/llm/hashed-embedder.js';

/**
 * Stored vectors and codes were written by earlier versions of the embedder and the coder, and
 * queries are embedded by the current one: any change to either must keep them bit-identical. The
 * digests below were taken from the original (string-per-word) implementations.
 */

const VOCABULARY = [
  // plain English, stop words, capitals and digits
  'stem', 'cells', 'Differentiate', 'INTO', 'cardiomyocytes', 'under', 'mechanical', 'load', 'the', 'and', 'of', 'is',
  'It', 'NOT', 'a', 'biomaterials', 'inductive', 'properties', '2024', 'COVID-19', 'p53', 'IL-6', '3.14', "don't", 'x',
  'an', 'ok', 'snake_case', 'e.g.', 'mitochondrial', 'antidisestablishmentarianism', 'pneumonoultramicroscopicsilicovolcanoconiosis',
  // accents, ligatures, width forms, case folding that changes length, other scripts, symbols
  'café', 'naïve', 'Ångström', 'Straße', 'İstanbul', 'ﬁnance', 'ＡＢＣ', '①②', 'Ωμέγα', 'ΣΊΣΥΦΟΣ', 'Дом', '細胞分化',
  'ひらがな', 'カタカナ', '한국어', 'עברית', 'العربية', 'हिन्दी', '🙂', '—', '…', '«quoted»', '(paren)', '[1]', 'a\u0301b',
  '\u00a0', '\t', 'x\u200by', 'Ǆemal', 'ǅ', 'ﬀ', 'K', '\ud800', 'e\u0300\u0301\u0302',
  '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', '𐐀𐐁x', '𠀀𠀁', 'a\udc00b', '\ud83d', 'Ⅻ', '½', 'x²', '\u0130I',
];

/** A fixed pseudo-random corpus: short queries, sentences and chunk-sized texts. */
function corpus(): string[] {
  let state = 12345;
  const next = (n: number) => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state % n;
  };
  const texts = ['', ' ', 'the', 'a b', 'Biomaterials lack inductive properties.', 'Stem cells differentiate into cardiomyocytes under mechanical load.'];
  for (let t = 0; t < 400; t++) {
    const words = t < 100 ? 1 + next(6) : t < 300 ? 10 + next(60) : 200 + next(200);
    const parts: string[] = [];
    for (let w = 0; w < words; w++) {
      parts.push(VOCABULARY[next(VOCABULARY.length)]!);
      parts.push([' ', ' ', ' ', ', ', '. ', '\n', '-', '/'][next(8)]!);
    }
    texts.push(parts.join(''));
  }
  return texts;
}

function digest(buffers: Iterable<Uint8Array>): string {
  const hash = createHash('sha256');
  for (const b of buffers) hash.update(b);
  return hash.digest('hex');
}

describe('hashed embeddings and binary codes stay bit-identical', () => {
  const texts = corpus();

  it.each([
    [384, '73a5390d68df1c415cf45fabc592ba2d87828602d7dc7063197aa38dba0245f0'],
    [64, '8704d38c82f73b9668f0ccd61316af9fcf392403c8200adc82e30d83eb9d1134'],
    [8, 'e7df883ca0f1dbb025865b68e7e870801a2d9c10861f54b3a3e6f058d7aa496f'],
  ])('vectors at dimension %i', (dim, expected) => {
    const vectors = texts.map((t) => hashedVector(t, dim));
    expect(digest(vectors.map((v) => new Uint8Array(v.buffer, v.byteOffset, v.byteLength)))).toBe(expected);
  });

  it.each([
    [384, '10dff06acd736b2f15da1d171795b80c866797edc2c4dc7730366b0a61c1c8b5'],
    [64, '2b14ef57bd4d24bc5944cfae7cdefcfd0a81dbc2fd0d9904a69002a7e0f3ae41'],
  ])('binary codes at dimension %i', (dim, expected) => {
    const coder = createBinaryCoder(dim);
    expect(digest(texts.map((t) => coder.encode(hashedVector(t, dim))))).toBe(expected);
  });
});

/** The coder as first written (radix-2 transform, a comparison per bit), for inputs no embedder produces. */
function referenceEncode(vector: Float32Array, dimension: number): Buffer {
  let width = 1;
  while (width < Math.max(dimension, 8)) width *= 2;
  const rotations = Math.max(1, Math.ceil(2048 / width));
  const out = Buffer.alloc((rotations * width) / 8);
  for (let r = 0; r < rotations; r++) {
    const a = new Float32Array(width);
    let state = (0x5eed + r * 7919) >>> 0;
    for (let i = 0; i < dimension; i++) {
      state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
      a[i] = vector[i]! * (state & 0x80000000 ? 1 : -1);
    }
    for (let h = 1; h < width; h *= 2)
      for (let i = 0; i < width; i += 2 * h)
        for (let j = i; j < i + h; j++) {
          const x = a[j]!;
          const y = a[j + h]!;
          a[j] = x + y;
          a[j + h] = x - y;
        }
    for (let i = 0; i < width; i++) if (a[i]! > 0) out[(r * width) / 8 + (i >> 3)]! |= 1 << (i & 7);
  }
  return out;
}

describe('binary codes of unusual vectors', () => {
  it.each([384, 100, 10])('match the plain transform at dimension %i, zeros, huge values and NaN included', (dim) => {
    const coder = createBinaryCoder(dim);
    let state = 99;
    const rand = () => ((state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
    const specials = [0, -0, 1e-45, -1e-45, 3e38, -3e38, Infinity, -Infinity, NaN];
    for (let n = 0; n < 200; n++) {
      const v = new Float32Array(dim);
      for (let i = 0; i < dim; i++) v[i] = n % 4 === 0 ? 0 : rand();
      if (n % 5 === 1) for (let k = 0; k < 3; k++) v[Math.floor(((rand() + 1) / 2) * dim)] = specials[(n + k) % specials.length]!;
      expect(coder.encode(v).equals(referenceEncode(v, dim)), `vector ${n}`).toBe(true);
    }
  });
});
