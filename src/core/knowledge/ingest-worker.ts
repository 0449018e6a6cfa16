// An ingestion worker thread (started by ingest-pool.ts from the compiled .js): extracts, chunks,
// embeds with the offline embedder and encodes binary codes, one document per message. It never
// touches the database or the network; vectors and codes go back as transferred buffers.
import { parentPort } from 'node:worker_threads';
import { AppError } from '../../errors.js';
import { ExtractionError } from './extract.js';
import { prepareHashed } from './prepare.js';
import type { WorkerReply, WorkerRequest } from './ingest-pool.js';

if (!parentPort) throw new Error('ingest-worker.js runs as a worker thread');
const port = parentPort;

// One document at a time, in the order sent (extraction awaits lazily loaded modules; a second
// document must not interleave and delay the first one's answer).
let previous: Promise<void> = Promise.resolve();

port.on('message', (request: WorkerRequest) => {
  previous = previous.then(async () => {
    let reply: WorkerReply;
    try {
      const prepared = await prepareHashed(request.input, request.dimension);
      reply = { id: request.id, ok: true, prepared };
    } catch (err) {
      // A bad document is the user's to read; anything else is logged by the main thread, not shown.
      const readable = err instanceof ExtractionError || err instanceof AppError;
      reply = { id: request.id, ok: false, readable, message: err instanceof Error ? err.message : String(err), stack: err instanceof Error ? err.stack : undefined };
    }
    port.postMessage(reply, reply.ok ? [reply.prepared.vectors.buffer as ArrayBuffer, reply.prepared.codes.buffer as ArrayBuffer] : []);
  });
});
