// The ingestion worker threads (the compiled dist/ script; `npm test` builds first) against the same
// pipeline run on this thread, and the pool's failure, abort and shutdown paths.
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ExtractionError } from '../../src/core/knowledge/extract.js';
import { createIngestPool, type IngestPool, ingestWorkerScript } from '../../src/core/knowledge/ingest-pool.js';
import { createBinaryCoder } from '../../src/core/knowledge/binary-code.js';
import { embeddingText, prepareHashed, type PrepareInput } from '../../src/core/knowledge/prepare.js';
import { HASHED_DIMENSION, hashedVector } from '../../src/llm/hashed-embedder.js';

const doc = (i: number): PrepareInput => ({
  kind: 'markdown',
  data: Buffer.from(`# Notes ${i}\n\n## Wombats\n\n${Array.from({ length: 40 }, (_, p) => `Wombat ${i} burrow ${p}: cube-shaped droppings mark the territory.`).join('\n\n')}`),
  name: `Notes ${i}`,
  nameFromTitle: false,
});

describe('ingestion worker pool', () => {
  let pool: IngestPool | undefined;
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
  });
  const open = (size = 2) => {
    const script = ingestWorkerScript();
    expect(script, 'no compiled ingest-worker.js: run `npx tsc -p tsconfig.json`').not.toBeNull();
    pool = createIngestPool({ size, dimension: HASHED_DIMENSION, logger: pino({ level: 'silent' }), script: script! });
    return pool;
  };

  it('prepares documents in threads exactly as this thread does: chunks, vectors and codes', async () => {
    const p = open();
    const inputs = Array.from({ length: 6 }, (_, i) => doc(i));
    const threaded = await Promise.all(inputs.map((input) => p.prepare(input)));
    expect(p.pending).toBe(0);
    for (const [i, input] of inputs.entries()) {
      const local = await prepareHashed(input, HASHED_DIMENSION);
      const got = threaded[i]!;
      expect(got.name).toBe(`Notes ${i}`);
      expect(got.chunks).toEqual(local.chunks);
      expect(got.chunks.length).toBeGreaterThan(1);
      expect(got.vectors).toBeInstanceOf(Float32Array);
      expect(got.vectors.length).toBe(got.chunks.length * HASHED_DIMENSION);
      expect([...got.vectors]).toEqual([...local.vectors]);
      expect([...got.codes]).toEqual([...local.codes]);
      // Written in place, each chunk's vector and code are those the embedder and the coder return.
      const coder = createBinaryCoder(HASHED_DIMENSION);
      local.chunks.forEach((c, j) => {
        const vector = hashedVector(embeddingText(local.name, c), HASHED_DIMENSION);
        expect([...local.vectors.subarray(j * HASHED_DIMENSION, (j + 1) * HASHED_DIMENSION)]).toEqual([...vector]);
        expect([...local.codes.subarray(j * local.codeBytes, (j + 1) * local.codeBytes)]).toEqual([...coder.encode(vector)]);
      });
    }
  });

  it('fails an unreadable document with a readable ExtractionError, and goes on', async () => {
    const p = open(1);
    const empty = p.prepare({ kind: 'text', data: Buffer.from('   \n\n  '), name: 'Empty', nameFromTitle: false });
    const broken = p.prepare({ kind: 'pdf', data: Buffer.from('%PDF-1.7 not really'), name: 'Broken', nameFromTitle: false });
    await expect(empty).rejects.toThrow(ExtractionError);
    await expect(empty).rejects.toThrow('No text could be extracted from the document.');
    await expect(broken).rejects.toBeInstanceOf(ExtractionError);
    expect((await p.prepare(doc(1))).chunks.length).toBeGreaterThan(1);
  });

  it('names a URL source after the page title only when asked', async () => {
    const p = open(1);
    const html = Buffer.from('<html><head><title>Quokka facts</title></head><body><main><p>The quokka smiles at tourists on Rottnest Island.</p></main></body></html>');
    expect((await p.prepare({ kind: 'html', data: html, name: 'https://example.com/q', nameFromTitle: true })).name).toBe('Quokka facts');
    expect((await p.prepare({ kind: 'html', data: html, name: 'Mine', nameFromTitle: false })).name).toBe('Mine');
  });

  it('rejects with the signal’s reason when aborted, and refuses work once closed', async () => {
    const p = open(1);
    const controller = new AbortController();
    const running = p.prepare(doc(1), controller.signal);
    const queued = p.prepare(doc(2), controller.signal);
    controller.abort(new Error('shutting down'));
    await expect(running).rejects.toThrow('shutting down');
    await expect(queued).rejects.toThrow('shutting down');
    await expect(p.prepare(doc(3), controller.signal)).rejects.toThrow('shutting down');
    const late = expect(p.prepare(doc(4))).rejects.toThrow(/closed|stopped/);
    await p.close();
    await late;
    await expect(p.prepare(doc(5))).rejects.toThrow(/closed/);
  });
});
