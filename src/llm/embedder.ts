/**
 * Turns text into vectors for the vector half of knowledge search. Every implementation returns
 * L2-normalised vectors, so a dot product is the cosine similarity.
 */
export interface Embedder {
  /** `hashed` (offline) or `openai` (any OpenAI-compatible endpoint). */
  readonly provider: 'hashed' | 'openai';
  readonly model: string;
  /** The vector length, or null while unknown (an `openai` model before its first answer). */
  dimension(): number | null;
  /** One vector per text, in order. Rejects with an AppError (`upstream_error`/`upstream_timeout`) when a remote model fails. */
  embed(texts: string[], signal?: AbortSignal): Promise<Float32Array[]>;
}

/** What the database records about the embedder its vectors came from; a change needs `switchboard reindex`. */
export function embedderId(embedder: Pick<Embedder, 'provider' | 'model'>): string {
  return `${embedder.provider}:${embedder.model}`;
}

/** Scales a vector to unit length in place (a zero vector stays zero). */
export function normalize(v: Float32Array): Float32Array {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += v[i]! * v[i]!;
  if (sum > 0) {
    const inv = 1 / Math.sqrt(sum);
    for (let i = 0; i < v.length; i++) v[i]! *= inv;
  }
  return v;
}
