import fc from '../helpers/property.js';
import { describe, expect, it } from 'vitest';
import { embedderId } from '../../src/llm/embedder.js';
import { createHashedEmbedder, HASHED_DIMENSION, hashedVector } from '../../src/llm/hashed-embedder.js';

const dot = (a: Float32Array, b: Float32Array): number => a.reduce((s, x, i) => s + x * b[i]!, 0);
const norm = (v: Float32Array): number => Math.sqrt(dot(v, v));
const cos = (a: string, b: string): number => dot(hashedVector(a), hashedVector(b));

describe('hashedVector', () => {
  it('has the requested dimension, 384 by default', () => {
    expect(HASHED_DIMENSION).toBe(384);
    expect(hashedVector('some text')).toHaveLength(384);
    for (const dim of [8, 64, 256, 1024]) expect(hashedVector('some text', dim)).toHaveLength(dim);
  });

  it('is unit length for any text with a content word, with both signs used', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), fc.constantFrom(64, 384), (noise, dim) => {
        const v = hashedVector(`${noise} anchorword`, dim);
        expect(norm(v)).toBeCloseTo(1, 5);
      }),
      { numRuns: 200 },
    );
    const v = hashedVector('Stem cells differentiate into cardiomyocytes under mechanical load.');
    expect(v.some((x) => x > 0)).toBe(true);
    expect(v.some((x) => x < 0)).toBe(true);
  });

  it('is the zero vector for text without words or with stop words only', () => {
    for (const text of ['', '   ', '!!! ... ??? —', 'the and of', 'It is not THE a']) {
      const v = hashedVector(text);
      expect(v).toHaveLength(384);
      expect(v.every((x) => x === 0)).toBe(true);
    }
  });

  it('is deterministic: the same text always gives the same vector, whatever came before', () => {
    const text = 'Biomaterials lack inductive properties.';
    const first = hashedVector(text);
    hashedVector('something else entirely, with many words words words');
    expect(hashedVector(text)).toEqual(first);
    expect(Array.from(first)).toEqual(Array.from(hashedVector(text)));
  });

  it('scores related texts above unrelated ones', () => {
    const a = 'biomaterials lack inductive properties';
    const related = 'inductive properties of biomaterial';
    const unrelated = 'the heart rate of mice';
    expect(cos(a, related)).toBeGreaterThan(0.4);
    expect(cos(a, unrelated)).toBeLessThan(0.15);
    expect(cos(a, related)).toBeGreaterThan(cos(a, unrelated) + 0.3);
  });

  it('is robust to inflection through character n-grams: plural ~ singular, well above unrelated words', () => {
    const pairs = [
      ['biomaterials', 'biomaterial'],
      ['vaccinations', 'vaccination'],
      ['proteins', 'protein'],
      ['mitochondrial', 'mitochondria'],
      ['receptors', 'receptor'],
      ['telescopes', 'telescope'],
      ['keyboards', 'keyboard'],
      ['infections', 'infection'],
    ] as const;
    const related: number[] = [];
    const unrelated: number[] = [];
    pairs.forEach(([plural, singular], i) => {
      // Different words, so only the character n-grams can make them alike.
      related.push(cos(plural, singular));
      unrelated.push(cos(plural, pairs[(i + 3) % pairs.length]![1]));
    });
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    for (const c of related) expect(c).toBeGreaterThan(0.15);
    // Unrelated words meet only through hash collisions (|cos| ≈ 0.1 at worst at 384 dimensions).
    for (const c of unrelated) expect(Math.abs(c)).toBeLessThan(0.12);
    expect(mean(related)).toBeGreaterThan(mean(unrelated) + 0.15);
    // In a sentence too: the inflected query still ranks its sentence first.
    const query = 'receptors of infections';
    expect(cos(query, 'the receptor of an infection')).toBeGreaterThan(cos(query, 'telescopes and keyboards') + 0.15);
  });

  it('ignores case and diacritics', () => {
    expect(hashedVector('Café')).toEqual(hashedVector('cafe'));
    expect(hashedVector('NAÏVE Résumé')).toEqual(hashedVector('naive resume'));
    expect(cos('Café au lait', 'cafe AU LAIT')).toBeCloseTo(1, 6);
  });

  it('weighs word order through bigrams: same words, different order, are close but not equal', () => {
    const c = cos('dog bites man', 'man bites dog');
    expect(c).toBeGreaterThan(0.7);
    expect(c).toBeLessThan(0.999);
  });
});

describe('createHashedEmbedder', () => {
  it('describes itself and embeds texts in order, as hashedVector does', async () => {
    const embedder = createHashedEmbedder(256);
    expect(embedder.provider).toBe('hashed');
    expect(embedder.dimension()).toBe(256);
    expect(embedderId(embedder)).toBe('hashed:fh-256');
    expect(createHashedEmbedder().dimension()).toBe(HASHED_DIMENSION);
    const texts = ['first text', 'second one', '', 'first text'];
    const vectors = await embedder.embed(texts);
    expect(vectors).toHaveLength(4);
    vectors.forEach((v, i) => expect(v).toEqual(hashedVector(texts[i]!, 256)));
    expect(vectors[0]).not.toEqual(vectors[1]);
    expect(await embedder.embed([])).toEqual([]);
  });
});
