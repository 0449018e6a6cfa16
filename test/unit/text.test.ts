// estimateTokens' CJK count and isWideChar (src/lib/text.ts) against the Unicode-property definition they stand for.
import { describe, expect, it } from 'vitest';
import { estimateTokens, isWideChar } from '../../src/lib/text.js';

const WIDE = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/gu;
/** The definition: every CJK character one token, the rest four characters each. */
function reference(text: string): number {
  if (text.length === 0) return 0;
  const wide = text.match(WIDE)?.length ?? 0;
  return Math.max(1, wide + Math.ceil((text.length - wide) / 4));
}

describe('estimateTokens', () => {
  it('counts every code point as the property class does, and isWideChar agrees', () => {
    let mismatches = 0;
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      // Four of it: a wide character then counts 4 tokens, a narrow one 1 (2 for a surrogate pair).
      const text = String.fromCodePoint(cp).repeat(4);
      if (estimateTokens(text) !== reference(text)) mismatches++;
      const char = String.fromCodePoint(cp);
      if (isWideChar(char) !== (char.match(WIDE)?.length === 1)) mismatches++;
    }
    expect(mismatches).toBe(0);
  });

  it('agrees on mixed texts, lone surrogates and the empty string', () => {
    const texts = [
      '',
      'plain ASCII prose, nothing wide',
      'Café au lait — naïve résumé',
      'ウォンバットは立方体の糞をする。한국어 텍스트 𠀋𠂉 and English',
      'lone \ud800 high and \udc00 low surrogates',
      '\u3099\u309b\u30fc\u1100\u11ff\uff66',
    ];
    for (const text of texts) expect(estimateTokens(text), text).toBe(reference(text));
    expect(estimateTokens('日本語')).toBe(3);
  });
});
