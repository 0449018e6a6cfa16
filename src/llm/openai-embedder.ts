import { UpstreamError } from '../errors.js';
import { type Embedder, normalize } from './embedder.js';
import { type OpenAI, hostOf, isAbortError, toUpstreamError } from './openai-client.js';

/** Inputs per request; OpenAI allows 2048, local servers are happier with less. */
export const DEFAULT_EMBEDDING_BATCH_SIZE = 96;
/** Characters per request, so a batch of long chunks stays well under request-size and token limits. */
export const DEFAULT_EMBEDDING_BATCH_CHARS = 300_000;

export interface OpenAiEmbedderOptions {
  /** From `createOpenAi`; only `embeddings.create` and the fields error messages use are needed. */
  client: Pick<OpenAI, 'embeddings' | 'baseURL' | 'apiKey' | 'timeout'>;
  model: string;
  batchSize?: number;
  /** Caps a batch by its total length too; a single longer text goes alone. */
  maxBatchChars?: number;
  /** Asks for shorter vectors (text-embedding-3-*); the answer must then have this length. */
  dimensions?: number;
}

/**
 * An Embedder over any OpenAI-compatible `/embeddings` endpoint. The vector length is learnt from
 * the first answer and every later answer must match it (mixed lengths would corrupt the index).
 */
export function createOpenAiEmbedder(options: OpenAiEmbedderOptions): Embedder {
  const { client, model, dimensions } = options;
  const batchSize = options.batchSize ?? DEFAULT_EMBEDDING_BATCH_SIZE;
  const maxChars = options.maxBatchChars ?? DEFAULT_EMBEDDING_BATCH_CHARS;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError('batchSize must be a positive integer');
  let dimension: number | null = dimensions ?? null;

  async function embedBatch(batch: string[], signal: AbortSignal | undefined): Promise<Float32Array[]> {
    let answer: unknown;
    try {
      answer = await client.embeddings.create(
        {
          model,
          // The OpenAI API rejects empty strings; a space embeds as "nothing" just as well.
          input: batch.map((t) => (t === '' ? ' ' : t)),
          // Required: without it the package asks for base64 and decodes it itself.
          encoding_format: 'float',
          ...(dimensions !== undefined ? { dimensions } : {}),
        },
        { signal },
      );
    } catch (err) {
      // The caller sees its own abort reason, as with fetch.
      if (signal?.aborted && isAbortError(err)) throw signal.reason ?? err;
      throw toUpstreamError(err, 'Embedding', client);
    }
    const vectors = parseAnswer(answer, batch.length, (why) => new UpstreamError(`Embedding failed: ${hostOf(client.baseURL)} ${why}.`));
    const length = vectors[0]!.length;
    if (dimension === null) dimension = length;
    else if (length !== dimension) {
      throw new UpstreamError(
        `Embedding failed: ${model} answered ${length}-dimensional vectors where ${dimension} were expected; a changed model needs \`switchboard reindex\`.`,
      );
    }
    return vectors.map(normalize);
  }

  return {
    provider: 'openai',
    model,
    dimension: () => dimension,
    async embed(texts, signal) {
      const out: Float32Array[] = [];
      for (const batch of batches(texts, batchSize, maxChars)) {
        signal?.throwIfAborted();
        out.push(...(await embedBatch(batch, signal)));
      }
      return out;
    },
  };
}

function* batches(texts: string[], size: number, maxChars: number): Generator<string[]> {
  let batch: string[] = [];
  let chars = 0;
  for (const text of texts) {
    if (batch.length > 0 && (batch.length >= size || chars + text.length > maxChars)) {
      yield batch;
      batch = [];
      chars = 0;
    }
    batch.push(text);
    chars += text.length;
  }
  if (batch.length > 0) yield batch;
}

/** Checks the answer's shape and returns the vectors in input order. */
function parseAnswer(answer: unknown, expected: number, fail: (why: string) => UpstreamError): Float32Array[] {
  const data = (answer as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) throw fail('answered without a data list');
  if (data.length !== expected) throw fail(`answered ${data.length} embeddings for ${expected} inputs`);
  // Servers may answer out of order; `index` says where each belongs. Without any index, trust the order.
  const indexed = data.some((d) => (d as { index?: unknown } | null)?.index !== undefined);
  const slots: (Float32Array | undefined)[] = new Array(expected);
  let length = -1;
  data.forEach((item: unknown, position) => {
    const { index, embedding } = (item ?? {}) as { index?: unknown; embedding?: unknown };
    const at = indexed ? index : position;
    if (typeof at !== 'number' || !Number.isInteger(at) || at < 0 || at >= expected || slots[at]) {
      throw fail('answered embeddings with missing or duplicate indexes');
    }
    if (!Array.isArray(embedding) || embedding.length === 0) throw fail('answered an embedding that is not a list of numbers');
    if (length === -1) length = embedding.length;
    else if (embedding.length !== length) throw fail('answered embeddings of different lengths');
    const v = new Float32Array(length);
    for (let i = 0; i < length; i++) {
      const x: unknown = embedding[i];
      if (typeof x !== 'number') throw fail('answered an embedding with a value that is not a number');
      v[i] = x;
      // After the Float32 conversion, which turns a huge double into Infinity.
      if (!Number.isFinite(v[i])) throw fail('answered an embedding with a value that is not a finite number');
    }
    slots[at] = v;
  });
  return slots as Float32Array[];
}
