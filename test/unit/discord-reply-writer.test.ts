/** The Discord reply writer's throttle against a slow scripted transport (the platform seam). */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createReplyWriter } from '../../bridges/discord/reply-writer.js';
import type { DiscordTransport } from '../../bridges/discord/transport.js';
import { sleep, waitFor } from '../fakes/discord-harness.js';

const tuning = { editIntervalMs: 100, typingIntervalMs: 1000, typingMaxMs: 10_000 };

function slowTransport(latencyMs: number) {
  const calls: Array<{ kind: string; content?: string; buttons?: boolean; start: number; end: number }> = [];
  let inFlight = 0;
  let maxInFlight = 0;
  let next = 1;
  const run = async <T>(kind: string, content: string | undefined, result: T, components?: unknown): Promise<T> => {
    const call = { kind, ...(content === undefined ? {} : { content }), buttons: components !== undefined, start: Date.now(), end: 0 };
    calls.push(call);
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    await sleep(latencyMs);
    inFlight--;
    call.end = Date.now();
    return result;
  };
  const transport: DiscordTransport = {
    post: (_c, content, _m, components) => run('post', content, String(next++), components),
    edit: (_c, _m, content, components) => run('edit', content, undefined, components),
    typing: async () => void calls.push({ kind: 'typing', start: Date.now(), end: Date.now() }),
    card: () => Promise.reject(new Error('a reply posts no cards')),
    editOriginal: () => Promise.reject(new Error('not a slash command')),
    followUp: () => Promise.reject(new Error('not a slash command')),
    startThread: () => Promise.reject(new Error('not a slash command')),
  };
  return { transport, calls, maxInFlight: () => maxInFlight };
}

describe('Discord reply writer', () => {
  it('keeps one request in flight, skips intermediate texts, and the final text wins', async () => {
    const t = slowTransport(250);
    const writer = createReplyWriter({ channelId: '1', messageId: '2' }, t.transport, tuning, pino({ level: 'silent' }), () => undefined);
    const started = Date.now();
    for (let i = 1; i <= 40; i++) {
      writer.progress(`text ${i}`);
      await sleep(20);
    }
    const finishing = Date.now();
    const ids = await writer.finish('final');
    const writes = t.calls.filter((c) => c.kind !== 'typing');
    expect(t.maxInFlight()).toBe(1);
    // One request at a time, 250 ms each: no more progressive writes can start than fit between the
    // first progress and finish() (~800 ms unless the machine is loaded), then the final edit.
    expect(writes.length).toBeLessThanOrEqual(2 + Math.floor((finishing - started) / 250));
    expect(writes.length).toBeLessThan(40);
    expect(writes.at(-1)?.content).toBe('final');
    expect(ids).toEqual(['1']);
    for (let i = 1; i < writes.length; i++) expect(writes[i]!.start).toBeGreaterThanOrEqual(writes[i - 1]!.end);
    writer.progress('too late');
    await sleep(300);
    expect(t.calls.filter((c) => c.kind !== 'typing')).toHaveLength(writes.length);
  });

  it('typing is sent at once and stops with the first text; finish twice answers the same ids', async () => {
    // The post takes 100 ms, over three typing intervals: none may be sent while it is on its way.
    const t = slowTransport(100);
    const writer = createReplyWriter({ channelId: '1', messageId: null }, t.transport, { ...tuning, typingIntervalMs: 30 }, pino({ level: 'silent' }), () => undefined);
    expect(t.calls[0]?.kind).toBe('typing');
    await waitFor(() => t.calls.filter((c) => c.kind === 'typing').length > 1, 'typing repeated meanwhile');
    writer.progress('hello');
    await waitFor(() => t.calls.some((c) => c.kind === 'post' && c.end > 0), 'the first post');
    await sleep(100); // over three typing intervals after the post: none may come
    const firstPost = t.calls.findIndex((c) => c.kind === 'post');
    expect(t.calls.slice(firstPost).some((c) => c.kind === 'typing')).toBe(false);
    const [a, b] = await Promise.all([writer.finish('bye'), writer.finish('ignored')]);
    expect(a).toEqual(b);
  });

  it('puts the feedback buttons under an answer, never under a notice (a handoff\'s) or an apology', async () => {
    const t = slowTransport(0);
    const silent = pino({ level: 'silent' });
    const answer = createReplyWriter({ channelId: '1', messageId: '2', feedback: true }, t.transport, tuning, silent, () => undefined);
    await answer.finish('an answer');
    const notice = createReplyWriter({ channelId: '1', messageId: '3', feedback: true }, t.transport, tuning, silent, () => undefined);
    await notice.finish('A person will reply here.', { answerButtons: false });
    const apology = createReplyWriter({ channelId: '1', messageId: '4', feedback: true }, t.transport, tuning, silent, () => undefined);
    await apology.fail('Sorry.');
    expect(t.calls.filter((c) => c.kind === 'post').map((c) => [c.content, c.buttons])).toEqual([
      ['an answer', true],
      ['A person will reply here.', false],
      ['Sorry.', false],
    ]);
  });

  it('discard (a person has the conversation) stops "typing…", posts nothing and lets the writer go', async () => {
    const t = slowTransport(0);
    let done = 0;
    const writer = createReplyWriter({ channelId: '1', messageId: null }, t.transport, { ...tuning, typingIntervalMs: 20 }, pino({ level: 'silent' }), () => done++);
    await waitFor(() => t.calls.filter((c) => c.kind === 'typing').length > 1, 'typing repeated');
    await writer.discard!();
    const typed = t.calls.length;
    await sleep(100); // five typing intervals: none may come after the discard
    expect(t.calls).toHaveLength(typed);
    expect(t.calls.some((c) => c.kind !== 'typing')).toBe(false);
    expect(done).toBe(1);
  });
});
