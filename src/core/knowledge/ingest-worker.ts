// An ingestion worker thread (started by ingest-pool.ts from the compiled .js): extracts, chunks,
// embeds with the offline embedder and encodes binary codes, one document per message. It never
// touches the database or the network; vectors and codes go back as transferred buffers.
import { AppError } from '../../errors.js';
import { serveRequests } from '../../lib/worker-pool.js';
import { ExtractionError } from './extract.js';
import type { IngestRequest } from './ingest-pool.js';
import { prepareHashed } from './prepare.js';

serveRequests((request: IngestRequest) => prepareHashed(request.input, request.dimension), {
  // One document at a time, in the order sent (extraction awaits lazily loaded modules; a second
  // document must not interleave and delay the first one's answer).
  oneAtATime: true,
  transferOf: (prepared) => [prepared.vectors.buffer as ArrayBuffer, prepared.codes.buffer as ArrayBuffer],
  // A bad document is the user's to read; anything else is logged by the main thread, not shown.
  known: (err) => err instanceof ExtractionError || err instanceof AppError,
});
