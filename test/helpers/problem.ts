import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  requestId: string;
  errors?: { path: string; message: string }[];
}

/**
 * The one problem+json assertion (API.md §1): status, media type, the exact body shape, the request
 * id in body and header alike, and — when given — the first field error's path. Returns the body.
 */
export function expectProblem(res: LightMyRequestResponse, status: number, code: string, path?: string): ProblemBody {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = res.json() as ProblemBody;
  // Exactly the keys of API.md §1: a 4xx carrying `stack` or `cause` fails here, not just a 500.
  const keys = ['code', 'detail', 'requestId', 'status', 'title', 'type'];
  expect(Object.keys(body).sort(), res.body).toEqual(body.errors === undefined ? keys : [...keys, 'errors'].sort());
  expect(body).toMatchObject({ type: `https://switchboard.dev/errors/${code}`, status, code });
  for (const e of body.errors ?? []) expect(Object.keys(e).sort(), res.body).toEqual(['message', 'path']);
  expect(body.title.length).toBeGreaterThan(0);
  expect(body.detail.length).toBeGreaterThan(0);
  expect(body.requestId.length).toBeGreaterThan(0);
  expect(res.headers['x-request-id']).toBe(body.requestId);
  if (path !== undefined) expect(body.errors?.[0]?.path, res.body).toBe(path);
  return body;
}
