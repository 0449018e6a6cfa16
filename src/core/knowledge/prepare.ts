// The CPU half of ingestion, with no I/O and no database: bytes → blocks → chunks, and for the
// offline embedder the vectors and binary codes too. It runs in the ingestion worker threads
// (ingest-worker.ts) and, for a remote embedder or without workers, on the main thread.
import { hashedVector } from '../../llm/hashed-embedder.js';
import { createBinaryCoder } from './binary-code.js';
import { type Chunk, chunkBlocks, type ChunkOptions } from './chunk.js';
import { ExtractionError, extract, type FileKind } from './extract.js';

/** The name of a URL source given none: its address, cut to the 200 characters a name may have (until the page's title replaces it). */
export function urlName(url: string): string {
  return url.slice(0, 200);
}

/** What the index's title column holds for a chunk: the source name and the headings above it. */
export function chunkTitle(sourceName: string, headingPath: string[]): string {
  return [sourceName, ...headingPath].join(' › ');
}

/** The text a chunk is embedded as: its title gives the vector the context the chunk itself may lack. */
export function embeddingText(sourceName: string, chunk: Pick<Chunk, 'headingPath' | 'text'>): string {
  return `${chunkTitle(sourceName, chunk.headingPath)}\n${chunk.text}`;
}

/** One document to cut into chunks. */
export interface PrepareInput {
  kind: FileKind;
  data: Uint8Array;
  /** The source's name as stored. */
  name: string;
  /** A URL source still named after its address takes the page's title, once extraction finds one. */
  nameFromTitle: boolean;
  chunking?: ChunkOptions | undefined;
}

/** A document's chunks and the name they are titled with. */
export interface ChunkedSource {
  name: string;
  chunks: Chunk[];
}

/** Extract and chunk; throws `ExtractionError` (a readable message) for a document with no text. */
export async function chunkSource(input: PrepareInput): Promise<ChunkedSource> {
  // Across threads a Buffer arrives as a plain Uint8Array: the extractors want a Buffer (a view, no copy).
  const data = Buffer.isBuffer(input.data) ? input.data : Buffer.from(input.data.buffer, input.data.byteOffset, input.data.byteLength);
  const extracted = await extract(input.kind, data);
  const chunks = chunkBlocks(extracted.blocks, input.chunking);
  if (chunks.length === 0) throw new ExtractionError('No text could be extracted from the document.');
  const name = input.nameFromTitle && extracted.title ? extracted.title.slice(0, 200) : input.name;
  return { name, chunks };
}

/** Chunks with their hashed vectors and binary codes, each kind in one flat typed array (transferable between threads). */
export interface PreparedSource extends ChunkedSource {
  dimension: number;
  /** `chunks.length × dimension` floats, chunk i at `i × dimension`. */
  vectors: Float32Array;
  /** `chunks.length × codeBytes` bytes, chunk i at `i × codeBytes`. */
  codes: Uint8Array;
  codeBytes: number;
}

const coders = new Map<number, ReturnType<typeof createBinaryCoder>>();

/** Extract, chunk, embed with the offline (hashed) embedder and encode the binary codes the vector index stores. */
export async function prepareHashed(input: PrepareInput, dimension: number): Promise<PreparedSource> {
  const { name, chunks } = await chunkSource(input);
  let coder = coders.get(dimension);
  if (!coder) coders.set(dimension, (coder = createBinaryCoder(dimension)));
  const codeBytes = coder.bits / 8;
  const vectors = new Float32Array(chunks.length * dimension);
  const codes = new Uint8Array(chunks.length * codeBytes);
  chunks.forEach((c, i) => {
    // Written in place: an array per chunk was allocated outside the heap, copied and left to the collector.
    const v = hashedVector(embeddingText(name, c), dimension, vectors.subarray(i * dimension, (i + 1) * dimension));
    coder.encodeInto(v, codes, i * codeBytes);
  });
  return { name, chunks, dimension, vectors, codes, codeBytes };
}
