/**
 * Documents and queries for the knowledge benchmark. With BEIR SciFact at ../shared/data/scifact
 * (read in place, never copied into the repo), documents are recombined sentences of its abstracts
 * and queries are its claims; without it, a seeded synthetic language (Zipf-distributed made-up
 * words) stands in. Either way document `i` is the same in every run.
 */
import fs from 'node:fs';
import path from 'node:path';
import { prng } from '../../test/helpers/prng.js';

export interface BenchDocument {
  kind: 'text' | 'markdown';
  name: string;
  content: string;
}

export interface BenchCorpus {
  /** Where the text came from, for the row notes. */
  origin: string;
  /** The i-th document: ~25 paragraphs of 3–5 sentences; every other one Markdown with sections. */
  document(i: number): BenchDocument;
  /** Queries in a seeded random order. */
  queries: string[];
}

const PARAGRAPHS = 25;
const SECTION_EVERY = 5;

const between = (rand: () => number, lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));

function shuffled<T>(items: T[], rand: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** Builds documents from a sentence source, a name source and a heading source. */
function documents(seed: number, sentence: (r: () => number) => string, title: (r: () => number) => string) {
  return (i: number): BenchDocument => {
    const rand = prng(seed ^ Math.imul(i + 1, 0x9e3779b1));
    const markdown = i % 2 === 0;
    const name = `${title(rand).slice(0, 180)} #${i}`;
    const parts: string[] = markdown ? [`# ${name}`] : [];
    for (let p = 0; p < PARAGRAPHS; p++) {
      if (markdown && p % SECTION_EVERY === 0) parts.push(`## ${title(rand).split(/\s+/).slice(0, 6).join(' ')}`);
      const n = between(rand, 3, 5);
      parts.push(Array.from({ length: n }, () => sentence(rand)).join(' '));
    }
    return { kind: markdown ? 'markdown' : 'text', name, content: parts.join('\n\n') };
  };
}

/** One JSON value per non-empty line (BEIR's .jsonl files). */
export function readJsonl<T>(file: string): T[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as T);
}

const SENTENCE_END = /(?<=[.!?])\s+(?=[A-Z0-9(])/;

function scifactCorpus(dir: string, seed: number): BenchCorpus {
  const abstracts = readJsonl<{ title: string; text: string }>(path.join(dir, 'corpus.jsonl'));
  const sentences = abstracts.flatMap((a) => a.text.split(SENTENCE_END).map((s) => s.trim())).filter((s) => s.split(/\s+/).length >= 4);
  const titles = abstracts.map((a) => a.title.trim()).filter(Boolean);
  const queries = readJsonl<{ text: string }>(path.join(dir, 'queries.jsonl')).map((q) => q.text);
  const pick = <T>(xs: T[]) => (r: () => number) => xs[Math.floor(r() * xs.length)]!;
  return {
    origin: `SciFact: ${sentences.length} abstract sentences recombined, ${queries.length} SciFact claims as queries`,
    document: documents(seed, pick(sentences), pick(titles)),
    queries: shuffled(queries, prng(seed + 1)),
  };
}

const SYLLABLES = 'ba be bi bo bu da de di do du fa fe fi fo ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu pa pe pi po pu ra re ri ro ru sa se si so su ta te ti to tu va ve vi vo za ze zi zo'.split(' ');

/** ~20k made-up words drawn with Zipf (s = 1) frequencies; sentences of 8–25 words, queries of 4–10. */
function syntheticCorpus(seed: number, queryCount: number): BenchCorpus {
  const rand = prng(seed);
  const vocabulary = new Set<string>();
  while (vocabulary.size < 20_000) {
    const n = between(rand, 2, 4);
    vocabulary.add(Array.from({ length: n }, () => SYLLABLES[Math.floor(rand() * SYLLABLES.length)]!).join(''));
  }
  const words = [...vocabulary];
  const cdf = new Float64Array(words.length);
  let total = 0;
  for (let r = 0; r < words.length; r++) cdf[r] = total += 1 / (r + 1);
  const word = (r: () => number) => {
    const x = r() * total;
    let lo = 0;
    let hi = cdf.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return words[lo]!;
  };
  const phrase = (r: () => number, lo: number, hi: number) => Array.from({ length: between(r, lo, hi) }, () => word(r)).join(' ');
  const sentence = (r: () => number) => {
    const s = phrase(r, 8, 25);
    return `${s[0]!.toUpperCase()}${s.slice(1)}.`;
  };
  const queryRand = prng(seed + 1);
  return {
    origin: 'synthetic (SciFact absent): Zipf vocabulary of 20k made-up words, sentences of 8–25 words, queries of 4–10',
    document: documents(seed, sentence, (r) => phrase(r, 3, 8)),
    queries: Array.from({ length: queryCount }, () => phrase(queryRand, 4, 10)),
  };
}

/**
 * SciFact's abstracts as a user would upload them: in corpus order, `perDocument` to a Markdown
 * document, each abstract a `## title` section holding its text (BEIR's `text`: the abstract's
 * sentences joined by spaces, one paragraph). Null when `dataDir` has no corpus.jsonl.
 */
export function scifactAbstractDocuments(dataDir: string, perDocument = 100): { abstracts: number; documents: BenchDocument[] } | null {
  const file = path.join(dataDir, 'corpus.jsonl');
  if (!fs.existsSync(file)) return null;
  const abstracts = readJsonl<{ title: string; text: string }>(file);
  const documents: BenchDocument[] = [];
  for (let i = 0; i < abstracts.length; i += perDocument) {
    const group = abstracts.slice(i, i + perDocument);
    documents.push({
      kind: 'markdown',
      name: `SciFact abstracts ${i + 1}-${i + group.length}`,
      content: group.map((a) => `## ${a.title.trim()}\n\n${a.text.trim()}`).join('\n\n'),
    });
  }
  return { abstracts: abstracts.length, documents };
}

/** SciFact when `dataDir` holds it, else the synthetic stand-in. */
export function loadCorpus(dataDir: string, seed: number, queryCount: number): BenchCorpus {
  const ok = ['corpus.jsonl', 'queries.jsonl'].every((f) => fs.existsSync(path.join(dataDir, f)));
  return ok ? scifactCorpus(dataDir, seed) : syntheticCorpus(seed, queryCount);
}
