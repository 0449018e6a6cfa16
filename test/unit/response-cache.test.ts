import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type ChangeCounters, registerResponseCache } from '../../src/http/response-cache.js';

/** Counters the test moves by hand, counting how often the cache asks for the data version. */
class FakeCounters implements ChangeCounters {
  local = 0;
  version = 0;
  versionReads = 0;
  localChanges() {
    return this.local;
  }
  dataVersion() {
    this.versionReads++;
    return this.version;
  }
}

describe('response cache batching', () => {
  let app: FastifyInstance;
  let counters: FakeCounters;
  let reads: number;

  beforeEach(async () => {
    counters = new FakeCounters();
    reads = 0;
    app = Fastify();
    app.decorateRequest('actor', null);
    app.addHook('onRequest', (request, _reply, done) => {
      request.actor = { kind: 'key', id: 'key_a', name: 'a', workspaceId: 'wsp_a', role: 'viewer', scopes: ['read'], userId: null };
      done();
    });
    registerResponseCache(app, counters);
    app.get('/n', { config: { cache: true } }, async () => ({ reads: ++reads }));
    await app.ready();
  });
  afterEach(async () => app.close());

  const get = async () => (await app.inject({ method: 'GET', url: '/n' })).json().reads as number;

  it('answers the requests of one event-loop turn from the cache under one data-version read', async () => {
    expect(await get()).toBe(1);
    const before = counters.versionReads;
    const answers = await Promise.all(Array.from({ length: 5 }, get));
    expect(answers).toEqual([1, 1, 1, 1, 1]);
    expect(counters.versionReads - before).toBe(1);
  });

  it('sees a commit by another connection made after a request arrived and before its batch ran', async () => {
    expect(await get()).toBe(1);
    const pending = get();
    counters.version++;
    expect(await pending).toBe(2);
    expect(await get()).toBe(2);
  });

  it('sees a write by this connection at the next request, with no data-version change', async () => {
    expect(await get()).toBe(1);
    counters.local++;
    expect(await get()).toBe(2);
    expect(await get()).toBe(2);
  });
});
