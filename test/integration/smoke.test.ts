import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';

describe('smoke', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => t.close());

  it('serves health without a key', async () => {
    const res = await t.request({ method: 'GET', url: '/health', as: null });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ status: 'ok', database: 'ok', model: { provider: 'offline' } });
  });

  it('creates and lists a persona', async () => {
    const res = await t.request({ method: 'POST', url: '/personas', body: { name: 'Ada', instructions: 'Be brief.' } });
    expect(res.statusCode, res.body).toBe(201);
    const list = await t.request({ method: 'GET', url: '/api/personas' });
    expect(list.json().data).toHaveLength(1);
  });
});
