/**
 * Text helpers shared by the keyword index (query building) and the offline embedder, so both see
 * the same words.
 */

/**
 * Lucene's English stop words, the list behind the published BM25 baselines (Elasticsearch,
 * Pyserini): dropping them from queries keeps ranking close to those figures and keeps an OR query
 * from matching every chunk.
 */
export const STOPWORDS: ReadonlySet<string> = new Set(
  'a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with'.split(
    ' ',
  ),
);

export function isStopword(word: string): boolean {
  return STOPWORDS.has(word);
}

const WORD = /[\p{L}\p{N}]+/gu;
const COMBINING_MARKS = /\p{M}+/gu;

/** Lower-cased words without diacritics, in order ("Café-au-lait" → cafe, au, lait). */
export function wordsOf(text: string): string[] {
  return text.normalize('NFKD').replace(COMBINING_MARKS, '').toLowerCase().match(WORD) ?? [];
}

const WIDE = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/gu;
const WIDE_CHAR = new RegExp(WIDE.source, 'u');

/** Whether one character counts as a whole token in `estimateTokens` (CJK). */
export function isWideChar(char: string): boolean {
  return WIDE_CHAR.test(char);
}

/**
 * Approximate model tokens: ~4 characters each for alphabetic scripts, one per CJK character. Good
 * to within ~15 % of OpenAI's tokenizers on English prose, which is all chunk sizing needs.
 */
export function estimateTokens(text: string): number {
  if (text.length === 0) return 0;
  const wide = text.match(WIDE)?.length ?? 0;
  return Math.max(1, wide + Math.ceil((text.length - wide) / 4));
}
