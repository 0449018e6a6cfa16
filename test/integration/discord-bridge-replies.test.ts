/**
 * The Discord bridge's outbound side against the fake Discord: typing, progressive replies
 * throttled to about one request a second, splitting at 2,000 characters with balanced fences,
 * mention safety, the priority send queue, and 429 handling by @discordjs/rest.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RateLimitedError, UnavailableError, ValidationError } from '../../src/errors.js';
import type { RecordedRequest } from '../fakes/discord-api.js';
import { ALICE, BOT, GENERAL_ID, RANDOM_ID } from '../fakes/discord-fixtures.js';
import { type Rig, sleep, startRig, waitFor } from '../fakes/discord-harness.js';

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

const POST = 'POST /channels/:id/messages';
const PATCH = 'PATCH /channels/:id/messages/:id';
const writes = (r: Rig): RecordedRequest[] => r.fake.requests.filter((q) => q.route === POST || q.route === PATCH);
const body = (q: RecordedRequest | undefined) => (q?.body ?? {}) as Record<string, unknown>;
const fenceLines = (text: string) => text.split('\n').filter((line) => line.startsWith('```')).length;
const words = (text: string) => text.split('\n').filter((line) => !line.startsWith('```')).join(' ').split(/\s+/).filter(Boolean);

/** A user's question in #general, delivered; answers its reply target. */
async function question(r: Rig) {
  const m = r.fake.userMessage({ channelId: GENERAL_ID, author: ALICE, content: `<@${BOT.id}> a question` });
  const inbound = await waitFor(() => r.rec.messages.find((x) => x.externalId === m.id), 'the question');
  return { id: m.id as string, replyTo: inbound.replyTo };
}

describe('Discord bridge: replies', () => {
  it('types until the first text, then posts a reply and edits it at most about once a second; the final text wins', async () => {
    rig = await startRig({ settings: { respondTo: 'all' }, tuning: { typingIntervalMs: 150 } });
    const q = await question(rig);
    const writer = rig.bridge.reply(q.replyTo);
    await waitFor(() => rig!.fake.requests.filter((x) => x.route === 'POST /channels/:id/typing').length >= 2, 'repeated typing');
    expect(writes(rig)).toEqual([]);
    let text = '';
    const started = Date.now();
    while (Date.now() - started < 2600) {
      text += `word${text.length} `;
      writer.progress(text);
      await sleep(30);
    }
    const finishing = Date.now();
    const ids = await writer.finish(`${text}done.`);

    const all = writes(rig);
    expect(all[0]?.route).toBe(POST);
    expect(body(all[0]).message_reference).toEqual({ message_id: q.id, fail_if_not_exists: false });
    expect(all.slice(1).every((w) => w.route === PATCH)).toBe(true);
    const progressive = all.slice(0, -1); // the last one is finish(), which does not wait
    // At most one start a second from the first progress on: the i-th cannot arrive before i s
    // have passed, and no more can have started than whole seconds fit before finish(). Bounds
    // from this test's own clock, which hold however late the requests arrive on a loaded machine.
    progressive.forEach((w, i) => expect(w.at).toBeGreaterThanOrEqual(started + i * 1000));
    expect(progressive.length).toBeLessThanOrEqual(1 + Math.floor((finishing - started) / 1000));
    expect(all.length).toBeGreaterThanOrEqual(3);
    expect(rig.fake.posted).toHaveLength(1);
    expect(ids).toEqual([rig.fake.posted[0]!.id]);
    expect(rig.fake.posted[0]!.content).toBe(`${text}done.`);
    // No typing once text is shown; the bot's own (echoed) messages are never taken as inbound.
    const typingAfter = () => rig!.fake.requests.filter((x) => x.route === 'POST /channels/:id/typing' && x.at > all[0]!.at).length;
    await sleep(400);
    expect(typingAfter()).toBe(0);
    expect(rig.rec.messages).toHaveLength(1);
  });

  it('a 5,000-character answer with a code block across the limit → parts ≤ 2,000 with balanced fences', async () => {
    rig = await startRig();
    const q = await question(rig);
    const code = ['```ts', ...Array.from({ length: 70 }, (_, i) => `const value${i} = compute(${i}); // padding padding`), '```'].join('\n');
    const answer = `${'An introduction sentence. '.repeat(60).trim()}\n\n${code}\n\nThat is all.`;
    expect(answer.length).toBeGreaterThan(4800);
    const writer = rig.bridge.reply(q.replyTo);
    writer.progress('Thinking');
    await waitFor(() => rig!.fake.posted.length === 1, 'the progressive message');
    const ids = await writer.finish(answer);

    expect(ids).toHaveLength(3);
    const parts = ids.map((id) => rig!.fake.posted.find((p) => p.id === id)!.content);
    for (const part of parts) {
      expect(part.length).toBeLessThanOrEqual(2000);
      expect(fenceLines(part) % 2).toBe(0);
    }
    expect(parts[1]!.startsWith('```ts\n')).toBe(true); // the block reopened with its language
    expect(words(parts.join('\n'))).toEqual(words(answer));
    expect(rig.fake.posted[0]!.edits.at(-1)?.content).toBe(parts[0]); // the progressive message became part 1
    expect(rig.fake.posted.slice(1).map((p) => p.body.message_reference)).toEqual([undefined, undefined]);
  });

  it('never pings: allowed_mentions is empty on every post and edit, and @everyone/@here are neutralised', async () => {
    rig = await startRig();
    const q = await question(rig);
    const writer = rig.bridge.reply(q.replyTo);
    writer.progress('Hey @everyone');
    await waitFor(() => rig!.fake.posted.length === 1, 'the progressive message');
    await writer.finish(`Hello @everyone and @here, <@${ALICE.id}>\n\`\`\`\n@everyone in code\n\`\`\``);
    await rig.bridge.send({ to: RANDOM_ID, text: '@here news', priority: 'normal' });
    const all = writes(rig);
    expect(all.length).toBe(3);
    for (const w of all) expect(body(w).allowed_mentions).toEqual({ parse: [], replied_user: false });
    expect(rig.fake.posted[0]!.content).toBe(`Hello @\u200beveryone and @\u200bhere, <@${ALICE.id}>\n\`\`\`\n@everyone in code\n\`\`\``);
    expect(rig.fake.posted[1]!.content).toBe('@\u200bhere news');
  });

  it('fail() replaces the partial text, or posts the apology when nothing was shown', async () => {
    rig = await startRig();
    const q = await question(rig);
    const first = rig.bridge.reply(q.replyTo);
    first.progress('Half an answer');
    await waitFor(() => rig!.fake.posted.length === 1, 'the progressive message');
    await first.fail('Sorry, something went wrong.');
    expect(rig.fake.posted.map((p) => p.content)).toEqual(['Sorry, something went wrong.']);
    await rig.bridge.reply(q.replyTo).fail('Sorry again.');
    expect(rig.fake.posted.map((p) => p.content)).toEqual(['Sorry, something went wrong.', 'Sorry again.']);
    expect(rig.fake.posted[1]!.body.message_reference).toEqual({ message_id: q.id, fail_if_not_exists: false });
  });

  it('a progressive message deleted meanwhile → the answer is posted anew', async () => {
    rig = await startRig();
    const q = await question(rig);
    const writer = rig.bridge.reply({ ...q.replyTo, messageId: null });
    writer.progress('Partial');
    await waitFor(() => rig!.fake.posted.length === 1, 'the progressive message');
    rig.fake.fail(PATCH, { kind: 'status', status: 404, body: { message: 'Unknown Message', code: 10008 } });
    const ids = await writer.finish('Complete.');
    expect(ids).toEqual([rig.fake.posted[1]!.id]);
    expect(rig.fake.posted[1]!.content).toBe('Complete.');
    expect(rig.fake.posted[1]!.body.message_reference).toBeUndefined();
  });

  it('a 429 on an edit is waited out (Retry-After) and the final text still wins', async () => {
    rig = await startRig();
    const q = await question(rig);
    const writer = rig.bridge.reply(q.replyTo);
    writer.progress('one');
    await waitFor(() => rig!.fake.posted.length === 1, 'the progressive message');
    rig.fake.fail(PATCH, { kind: 'rate-limit', retryAfter: 1 });
    writer.progress('one two');
    // The refused edit is retried once Retry-After has passed.
    await waitFor(() => rig!.fake.requests.filter((x) => x.route === PATCH).length >= 2, 'the edit retried after Retry-After', 5_000);
    writer.progress('one two three');
    const ids = await writer.finish('one two three four');
    const patches = rig.fake.requests.filter((x) => x.route === PATCH);
    expect(patches[1]!.at - patches[0]!.at).toBeGreaterThanOrEqual(950);
    expect(ids).toHaveLength(1);
    expect(rig.fake.posted[0]!.content).toBe('one two three four');
  });
});

describe('Discord bridge: send()', () => {
  it('posts (as a reply to threadId), splits, and answers the first part\'s id', async () => {
    rig = await startRig();
    const q = await question(rig);
    const sent = await rig.bridge.send({ to: GENERAL_ID, text: 'x'.repeat(2500), threadId: q.id, priority: 'low' });
    const lengths = rig.fake.posted.map((p) => p.content.length);
    expect(lengths).toHaveLength(2);
    expect(lengths[0]).toBeLessThanOrEqual(2000);
    expect(lengths[0]! + lengths[1]!).toBe(2500);
    expect(sent.externalId).toBe(rig.fake.posted[0]!.id);
    expect(rig.fake.posted[0]!.body.message_reference).toEqual({ message_id: q.id, fail_if_not_exists: false });
    expect(rig.fake.posted[1]!.body.message_reference).toBeUndefined();
  });

  it('high priority goes ahead of queued sends and is marked 🔴; normal goes ahead of low', async () => {
    rig = await startRig();
    rig.fake.fail(POST, { kind: 'delay', ms: 400 });
    const a = rig.bridge.send({ to: GENERAL_ID, text: 'A', priority: 'normal' });
    await waitFor(() => writes(rig!).length === 1, 'A in flight');
    const rest = [
      rig.bridge.send({ to: GENERAL_ID, text: 'L', priority: 'low' }),
      rig.bridge.send({ to: GENERAL_ID, text: 'B', priority: 'normal' }),
      rig.bridge.send({ to: GENERAL_ID, text: 'H', priority: 'high' }),
    ];
    await Promise.all([a, ...rest]);
    expect(rig.fake.posted.map((p) => p.content)).toEqual(['A', '🔴 H', 'B', 'L']);
  });

  it('a 429 is retried after Retry-After; one asking for too long fails fast with rate_limited', async () => {
    rig = await startRig();
    rig.fake.fail(POST, { kind: 'rate-limit', retryAfter: 1 });
    const sent = await rig.bridge.send({ to: GENERAL_ID, text: 'patience', priority: 'normal' });
    const posts = rig.fake.requests.filter((x) => x.route === POST);
    expect(posts).toHaveLength(2);
    expect(posts[1]!.at - posts[0]!.at).toBeGreaterThanOrEqual(950);
    expect(rig.fake.posted.map((p) => p.id)).toEqual([sent.externalId]);

    rig.fake.fail(POST, { kind: 'rate-limit', retryAfter: 120 });
    const started = Date.now();
    const err = await rig.bridge.send({ to: RANDOM_ID, text: 'too slow', priority: 'normal' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    // Fails at once rather than waiting the 120 s asked for (a bound far from both, for a loaded machine).
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(rig.fake.requests.filter((x) => x.route === POST)).toHaveLength(3);
  });

  it('a channel Discord does not know → validation error on `to`; after stop() → unavailable', async () => {
    rig = await startRig();
    const err = await rig.bridge.send({ to: '399999999999999999', text: 'hello', priority: 'normal' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).errors?.[0]?.path).toBe('to');
    await rig.bridge.stop();
    await expect(rig.bridge.send({ to: GENERAL_ID, text: 'hello', priority: 'normal' })).rejects.toBeInstanceOf(UnavailableError);
  });
});
