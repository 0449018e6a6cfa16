import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { UpstreamError, UpstreamTimeoutError } from '../../src/errors.js';
import { createOpenAi, toUpstreamError } from '../../src/llm/openai-client.js';
import { createOpenAiEmbedder } from '../../src/llm/openai-embedder.js';
import { FAKE_OPENAI_KEY, type FakeOpenAi, fakeEmbedding, startFakeOpenAi } from '../fakes/openai-server.js';

let fake: FakeOpenAi;

beforeAll(async () => {
  fake = await startFakeOpenAi();
});
afterAll(async () => {
  await fake.close();
});
beforeEach(() => fake.reset());

const MODEL = 'text-embedding-3-small';

function embedder(options: { apiKey?: string; timeoutMs?: number; maxRetries?: number; batchSize?: number; maxBatchChars?: number; dimensions?: number } = {}) {
  const { apiKey = FAKE_OPENAI_KEY, timeoutMs = 2_000, maxRetries = 0, ...rest } = options;
  const client = createOpenAi({ apiKey, baseUrl: fake.url, timeoutMs, maxRetries });
  return createOpenAiEmbedder({ client, model: MODEL, ...rest });
}

function expected(text: string, dimension = 8): number[] {
  const v = fakeEmbedding(text, dimension);
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

function embeddingBodies(): { model: string; input: string[]; encoding_format?: string; dimensions?: number }[] {
  return fake.requests.filter((r) => r.path === '/v1/embeddings').map((r) => r.body as never);
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => err as Error,
  );
}

describe('createOpenAiEmbedder through the openai package', { timeout: 5_000 }, () => {
  it('returns unit vectors in input order even when the server answers out of order', async () => {
    fake.set({ shuffle: true });
    const texts = ['alpha', 'beta', 'gamma', 'delta'];
    const e = embedder();
    const vectors = await e.embed(texts);
    expect(vectors).toHaveLength(4);
    vectors.forEach((v, i) => {
      expect(v).toBeInstanceOf(Float32Array);
      expect(Math.hypot(...v)).toBeCloseTo(1, 5);
      Array.from(v).forEach((x, j) => expect(x).toBeCloseTo(expected(texts[i]!)[j]!, 5));
    });
    expect(e.provider).toBe('openai');
    expect(e.model).toBe(MODEL);
  });

  it('asks for floats, names the model and sends the bearer key', async () => {
    await embedder().embed(['one', 'two']);
    expect(fake.requests).toHaveLength(1);
    const [req] = fake.requests;
    expect(req!.method).toBe('POST');
    expect(req!.headers.authorization).toBe(`Bearer ${FAKE_OPENAI_KEY}`);
    expect(req!.body).toEqual({ model: MODEL, input: ['one', 'two'], encoding_format: 'float' });
  });

  it('batches by count and by total characters', async () => {
    const texts = Array.from({ length: 250 }, (_, i) => `text ${i}`);
    const vectors = await embedder({ batchSize: 96 }).embed(texts);
    expect(embeddingBodies().map((b) => b.input.length)).toEqual([96, 96, 58]);
    expect(embeddingBodies().flatMap((b) => b.input)).toEqual(texts);
    expect(Array.from(vectors[200]!)[0]).toBeCloseTo(expected('text 200')[0]!, 5);

    fake.reset();
    await embedder({ maxBatchChars: 10 }).embed(['aaaa', 'bbbb', 'cccc', 'd'.repeat(25), 'e']);
    expect(embeddingBodies().map((b) => b.input)).toEqual([['aaaa', 'bbbb'], ['cccc'], ['d'.repeat(25)], ['e']]);
  });

  it('makes no request for no input and sends empty strings as a space', async () => {
    const e = embedder();
    expect(await e.embed([])).toEqual([]);
    expect(fake.requests).toHaveLength(0);
    const vectors = await e.embed(['', 'x']);
    expect(embeddingBodies()[0]!.input).toEqual([' ', 'x']);
    expect(vectors).toHaveLength(2);
  });

  it('records the dimension and refuses an answer of another one', async () => {
    const e = embedder();
    expect(e.dimension()).toBeNull();
    await e.embed(['a']);
    expect(e.dimension()).toBe(8);
    fake.set({ dimension: 16 });
    const err = await rejection(e.embed(['b']));
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err.message).toMatch(/16-dimensional.*8/);
    expect(e.dimension()).toBe(8);
  });

  it('passes dimensions on and expects vectors of that length', async () => {
    const e = embedder({ dimensions: 4 });
    const [v] = await e.embed(['short']);
    expect(embeddingBodies()[0]!.dimensions).toBe(4);
    expect(v).toHaveLength(4);
    expect(e.dimension()).toBe(4);
  });

  it('maps a rejected key to a 502 that does not carry the key', async () => {
    const key = 'sk-wrong-secret-0123456789';
    const err = await rejection(embedder({ apiKey: key }).embed(['a']));
    expect(err).toBeInstanceOf(UpstreamError);
    expect((err as UpstreamError).status).toBe(502);
    expect((err as UpstreamError).code).toBe('upstream_error');
    expect(err.message).toContain('401');
    expect(err.message).not.toContain(key);
    expect(err.message).not.toContain('wrong-secret');
  });

  it('keeps a short upstream reason for other 4xx answers, scrubbed of keys', async () => {
    fake.fail({ kind: 'status', status: 400, message: `Bad input for key sk-live-abcdef0123456789 ${'x'.repeat(500)}` });
    const err = await rejection(embedder().embed(['a']));
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err.message).toContain('400: Bad input for key [redacted]');
    expect(err.message).not.toContain('abcdef0123456789');
    expect(err.message.length).toBeLessThan(300);
  });

  it('recovers from two 500s through the package retries', async () => {
    fake.fail(
      { kind: 'status', status: 500, headers: { 'retry-after-ms': '10' } },
      { kind: 'status', status: 429, headers: { 'retry-after': '0' } },
    );
    const vectors = await embedder({ maxRetries: 2 }).embed(['a', 'b']);
    expect(vectors).toHaveLength(2);
    expect(fake.requests).toHaveLength(3);
  });

  it('gives up with a 502 once retries are exhausted', async () => {
    fake.fail({ kind: 'status', status: 500 }, { kind: 'status', status: 500 });
    const err = await rejection(embedder({ maxRetries: 0 }).embed(['a']));
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err.message).toContain('500');
    expect(fake.requests).toHaveLength(1);
  });

  it('times out a server that does not answer with a 504 within a second', async () => {
    fake.fail({ kind: 'hang' });
    const started = Date.now();
    const err = await rejection(embedder({ timeoutMs: 300, maxRetries: 0 }).embed(['a']));
    expect(err).toBeInstanceOf(UpstreamTimeoutError);
    expect((err as UpstreamTimeoutError).status).toBe(504);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('times out a server that stalls after the headers (the package timeout stops there)', async () => {
    fake.fail({ kind: 'stall-body' });
    const started = Date.now();
    const err = await rejection(embedder({ timeoutMs: 300, maxRetries: 0 }).embed(['a']));
    expect(err).toBeInstanceOf(UpstreamTimeoutError);
    expect(Date.now() - started).toBeLessThan(1_000);
    await vi.waitFor(() => expect(fake.requests[0]!.closedByClient).toBe(true), { timeout: 1_000 });
  });

  it('rejects with the caller abort and closes the request', async () => {
    fake.fail({ kind: 'hang' });
    const controller = new AbortController();
    const pending = embedder({ maxRetries: 2 }).embed(['a'], controller.signal);
    await vi.waitFor(() => expect(fake.requests).toHaveLength(1), { timeout: 1_000 });
    const reason = new DOMException('client went away', 'AbortError');
    controller.abort(reason);
    expect(await rejection(pending)).toBe(reason);
    await vi.waitFor(() => expect(fake.requests[0]!.closedByClient).toBe(true), { timeout: 1_000 });
    expect(fake.requests).toHaveLength(1);
  });

  it('sends nothing when the signal is already aborted', async () => {
    const err = await rejection(embedder().embed(['a'], AbortSignal.abort()));
    expect(err.name).toBe('AbortError');
    expect(fake.requests).toHaveLength(0);
  });

  it('maps a refused connection to a 502 naming the host', async () => {
    fake.fail({ kind: 'close' });
    const err = await rejection(embedder({ maxRetries: 0 }).embed(['a']));
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err.message).toBe(`Embedding failed: could not reach ${new URL(fake.url).host}.`);
  });

  it.each([
    ['wrong count', { object: 'list', data: [{ object: 'embedding', index: 0, embedding: [1, 2] }] }, /1 embeddings for 2 inputs/],
    ['no data', { object: 'list' }, /without a data list/],
    ['duplicate index', { data: [{ index: 0, embedding: [1] }, { index: 0, embedding: [1] }] }, /indexes/],
    ['mixed lengths', { data: [{ index: 0, embedding: [1, 2] }, { index: 1, embedding: [1] }] }, /different lengths/],
    ['not numbers', { data: [{ index: 0, embedding: [1, 'x'] }, { index: 1, embedding: [1, 2] }] }, /not a number/],
    ['overflowing float32', { data: [{ index: 0, embedding: [1, 1e300] }, { index: 1, embedding: [1, 2] }] }, /finite/],
    ['base64 string', { data: [{ index: 0, embedding: 'AACAPw==' }, { index: 1, embedding: 'AACAPw==' }] }, /not a list of numbers/],
  ])('refuses a malformed answer (%s) with a 502', async (_name, body, message) => {
    fake.fail({ kind: 'json', body });
    const e = embedder();
    const err = await rejection(e.embed(['a', 'b']));
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err.message).toMatch(message);
    expect(e.dimension()).toBeNull();
  });

  it('refuses a body that is not JSON with a 502', async () => {
    fake.fail({ kind: 'malformed' });
    const err = await rejection(embedder().embed(['a']));
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err.message).toContain('malformed JSON');
  });
});

describe('createOpenAi', { timeout: 5_000 }, () => {
  it('works against a keyless local endpoint with a placeholder key', async () => {
    fake.set({ apiKey: null });
    const client = createOpenAi({ baseUrl: fake.url, maxRetries: 0 });
    await createOpenAiEmbedder({ client, model: 'nomic-embed-text' }).embed(['a']);
    expect(fake.requests[0]!.headers.authorization).toBe('Bearer not-needed');
  });

  it('ignores the package environment variables and needs a key or a base URL', () => {
    vi.stubEnv('OPENAI_BASE_URL', 'http://127.0.0.1:1/v1');
    vi.stubEnv('OPENAI_API_KEY', 'sk-from-env');
    try {
      const client = createOpenAi({ apiKey: 'sk-given' });
      expect(client.baseURL).toBe('https://api.openai.com/v1');
      expect(client.apiKey).toBe('sk-given');
      expect(() => createOpenAi({})).toThrow(/apiKey or a baseUrl/);
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('the fake answers base64 when the client does not ask for floats', async () => {
    // Guards the fake itself: a client forgetting encoding_format gets base64, which the embedder refuses.
    const res = await fetch(`${fake.url}/embeddings`, {
      method: 'POST',
      headers: { authorization: `Bearer ${FAKE_OPENAI_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, input: ['a'] }),
    });
    const body = (await res.json()) as { data: { embedding: unknown }[] };
    expect(typeof body.data[0]!.embedding).toBe('string');
    const decoded = new Float32Array(Uint8Array.from(Buffer.from(body.data[0]!.embedding as string, 'base64')).buffer);
    expect(Array.from(decoded)).toEqual(fakeEmbedding('a', 8));
  });

  it('answers unknown paths with a 404 in OpenAI error shape, mapped to a 502', async () => {
    const res = await fetch(`${fake.url}/nope`, { headers: { authorization: `Bearer ${FAKE_OPENAI_KEY}` } });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'unknown_url' } });
    const client = createOpenAi({ apiKey: FAKE_OPENAI_KEY, baseUrl: fake.url.replace(/\/v1$/, ''), maxRetries: 0 });
    const err = await rejection(createOpenAiEmbedder({ client, model: MODEL }).embed(['a']));
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err.message).toContain('404');
  });

  it('toUpstreamError passes AppErrors and aborts through unchanged', () => {
    const app = new UpstreamError('x');
    expect(toUpstreamError(app, 'Embedding')).toBe(app);
    const abort = new DOMException('stop', 'AbortError');
    expect(toUpstreamError(abort, 'Embedding')).toBe(abort);
    expect(toUpstreamError(new Error('boom'), 'Embedding')).toBeInstanceOf(UpstreamError);
  });
});
