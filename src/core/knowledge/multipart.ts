import type { FastifyRequest } from 'fastify';
import { AppError, PayloadTooLargeError, UnsupportedMediaTypeError, ValidationError } from '../../errors.js';
import { refuseNul } from '../../lib/nul.js';
import { uploadFieldsSchema } from './knowledge.schemas.js';
import type { CreateSourceInput } from './knowledge.service.js';

/** Marks a body built from multipart parts, so the JSON validator lets it through (it was checked here). */
export const FROM_MULTIPART = Symbol('fromMultipart');

const FIELDS = new Set(['file', 'name', 'personaId', 'metadata']);

/** @fastify/multipart's limit and format errors as problem+json errors. */
function toAppError(err: unknown, limitBytes: number): unknown {
  const code = (err as { code?: string }).code;
  if (err instanceof AppError) return err;
  if (code === 'FST_REQ_FILE_TOO_LARGE' || code === 'FST_PARTS_LIMIT' || code === 'FST_FILES_LIMIT' || code === 'FST_FIELDS_LIMIT') {
    return code === 'FST_REQ_FILE_TOO_LARGE' ? new PayloadTooLargeError(limitBytes) : new ValidationError('Too many parts: send one `file` and at most `name`, `personaId` and `metadata`.');
  }
  if (code === 'FST_INVALID_MULTIPART_CONTENT_TYPE') return new UnsupportedMediaTypeError();
  if (code === 'FST_PROTO_VIOLATION') return ValidationError.field('body', 'prototype property names are not allowed');
  return new ValidationError(`The multipart body could not be read: ${(err as Error).message}`);
}

/**
 * Reads a `multipart/form-data` knowledge upload into the body the service takes: exactly one
 * `file` part (at most `limitBytes`), optional `name`, `personaId` and `metadata` (a JSON object as
 * text); any other part is refused by name.
 */
export async function readKnowledgeUpload(request: FastifyRequest, limitBytes: number): Promise<CreateSourceInput & { [FROM_MULTIPART]: true }> {
  const fields: Record<string, string> = {};
  let file: { filename: string | null; mediaType: string | null; data: Buffer } | null = null;
  try {
    for await (const part of request.parts({ limits: { fileSize: limitBytes, files: 1, fields: 10, parts: 12 } })) {
      if (!FIELDS.has(part.fieldname)) {
        if (part.type === 'file') part.file.resume();
        throw ValidationError.field(part.fieldname, 'unknown field');
      }
      if (part.type === 'file') {
        if (part.fieldname !== 'file') throw ValidationError.field(part.fieldname, 'must be a text field');
        file = { filename: part.filename || null, mediaType: part.mimetype || null, data: await part.toBuffer() };
      } else {
        if (part.fieldname === 'file') throw ValidationError.field('file', 'must be a file part');
        if (part.valueTruncated) throw ValidationError.field(part.fieldname, 'is too long');
        fields[part.fieldname] = String(part.value);
      }
    }
  } catch (err) {
    throw toAppError(err, limitBytes);
  }
  if (!file) throw ValidationError.field('file', 'is required (a multipart part named "file")');
  // What the multipart headers name is stored as text, which on PostgreSQL cannot hold a NUL (lib/nul.ts).
  refuseNul({ file: { filename: file.filename, mediaType: file.mediaType }, ...fields }, 'upload');
  const parsed = uploadFieldsSchema.safeParse(fields);
  if (!parsed.success) {
    // Dotted paths without empty segments, as the JSON body's errors (error-handler.ts).
    const errors = parsed.error.issues.map((i) => ({ path: i.path.map(String).filter(Boolean).join('.'), message: i.message }));
    throw new ValidationError(`Invalid upload: ${errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`, errors);
  }
  return {
    kind: 'file',
    file,
    ...parsed.data,
    [FROM_MULTIPART]: true,
  };
}
