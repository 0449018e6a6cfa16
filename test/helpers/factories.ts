/** One factory per object (DESIGN.md): each creates through the HTTP API and expects success. */
import { expect } from 'vitest';
import type { Persona } from '../../src/core/personas/personas.schemas.js';
import type { TestApp } from './app.js';

/** POST /personas with defaults for what is not given; `as` is another key (default the admin key). */
export async function createPersona(t: TestApp, fields: Record<string, unknown> = {}, as?: string): Promise<Persona> {
  const res = await t.request({ method: 'POST', url: '/personas', body: { name: 'Ada', instructions: 'Answer briefly.', ...fields }, ...(as ? { as } : {}) });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as Persona;
}

/** POST /knowledge (JSON) expecting 202, returning the source. */
export async function addSource(t: TestApp, body: Record<string, unknown>, as?: string) {
  const res = await t.request({ method: 'POST', url: '/knowledge', body, ...(as ? { as } : {}) });
  expect(res.statusCode, res.body).toBe(202);
  return res.json();
}
