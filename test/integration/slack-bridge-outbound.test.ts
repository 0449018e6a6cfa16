/**
 * The Slack bridge's replies and sends against the fake Slack: progressive edits, splitting, the
 * send queue's priority, and 429 Retry-After.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { APPENDS_PER_SECOND, HIGH_PRIORITY_MARK } from '../../bridges/slack/outbound.js';
import { startFakeSlack, type FakeSlack } from '../fakes/slack-api.js';
import { BOT_TOKEN, makeBridge, sleep, until, type Harness } from '../fakes/slack-harness.js';

let fake: FakeSlack;
let h: Harness;

const fenceLines = (text: string): number => text.split('\n').filter((line) => line.startsWith('```')).length;
const textOf = (call: { body: Record<string, unknown> } | undefined): string => String(call?.body.text ?? '');

beforeAll(async () => {
  fake = await startFakeSlack({ botToken: BOT_TOKEN });
});
afterEach(async () => {
  await h.bridge.stop();
  fake.reset();
});
afterAll(async () => {
  await fake.close();
});

describe('Slack bridge, replies', () => {
  it('streams 50 answers at once within the channel’s append budget, each ending with all of its text', async () => {
    const ai = await startFakeSlack({ botToken: BOT_TOKEN, aiApps: true });
    try {
      h = makeBridge(ai);
      await h.bridge.start();
      const writers = Array.from({ length: 50 }, (_, i) => h.bridge.reply({ channel: 'C1', thread_ts: `1700.${String(i).padStart(6, '0')}`, user: `U${i}`, team: 'T1' }));
      const texts = writers.map(() => '');
      const t0 = Date.now();
      while (Date.now() - t0 < 3000) {
        writers.forEach((w, i) => {
          texts[i] += `word${i} `;
          w.progress(texts[i]!);
        });
        await sleep(50);
      }
      await Promise.all(writers.map((w, i) => w.finish(`${texts[i]}done`)));
      const appends = ai.ok('chat.appendStream').map((c) => c.at);
      // Any one-second window: at most the bucket (10) plus a second's refill (10), whatever the load.
      const worst = Math.max(0, ...appends.map((at) => appends.filter((x) => x >= at && x < at + 1000).length));
      expect(worst, `appendStream calls in the busiest second (of ${appends.length})`).toBeLessThanOrEqual(2 * APPENDS_PER_SECOND);
      expect(ai.ok('chat.startStream')).toHaveLength(50);
      expect(ai.ok('chat.stopStream')).toHaveLength(50);
      for (const [i, start] of ai.ok('chat.startStream').entries()) {
        const thread = String(start.body.thread_ts);
        const n = Number(thread.split('.')[1]);
        expect(ai.text('C1', String(start.response!.ts)), `answer ${i}`).toBe(`${texts[n]}done`);
      }
      await h.bridge.stop();
    } finally {
      await ai.close();
    }
  });

  it('shows the thread a status while the answer is worked out, a tool’s status until the first text, and asks a Slack without statuses once', async () => {
    const ai = await startFakeSlack({ botToken: BOT_TOKEN, aiApps: true });
    try {
      h = makeBridge(ai);
      h.settings.streaming = false;
      await h.bridge.start();
      const writer = h.bridge.reply({ channel: 'C1', thread_ts: '1700.000002', user: 'U1', team: 'T1' });
      writer.status?.('is searching the knowledge…');
      await until('two statuses', () => ai.ok('assistant.threads.setStatus').length === 2);
      writer.progress('Refunds take');
      writer.status?.('is using another.tool…');
      await writer.finish('Refunds take 5 business days.');
      expect(ai.ok('assistant.threads.setStatus').map((c) => c.body.status)).toEqual(['is thinking…', 'is searching the knowledge…']);
      await h.bridge.stop();
    } finally {
      await ai.close();
    }
    // This fake has no statuses: the first reply asks, the channel remembers the refusal.
    h = makeBridge(fake);
    await h.bridge.start();
    // A reply is finished once its status call settled: the refusal is known by then.
    await h.bridge.reply({ channel: 'C1', thread_ts: '1700.000003' }).finish('one');
    await h.bridge.reply({ channel: 'C1', thread_ts: '1700.000004' }).finish('two');
    expect(fake.calls.filter((c) => c.method === 'assistant.threads.setStatus')).toHaveLength(1);
  });

  it('posts the first progress once, edits it at most about once a second, and the final text wins', async () => {
    h = makeBridge(fake);
    await h.bridge.start();
    fake.reset();
    const writer = h.bridge.reply({ channel: 'C1', thread_ts: '1700.000001' });
    let text = '';
    const t0 = Date.now();
    while (Date.now() - t0 < 2600) {
      text += 'word ';
      writer.progress(`**Answer:** ${text}`);
      await sleep(40);
    }
    const finishing = Date.now();
    const ids = await writer.finish('**Answer:** done, see [docs](https://example.com)');

    const posts = fake.ok('chat.postMessage');
    const updates = fake.ok('chat.update');
    expect(posts).toHaveLength(1);
    expect(posts[0]?.body).toMatchObject({ channel: 'C1', thread_ts: '1700.000001' });
    expect(textOf(posts[0])).toMatch(/^\*Answer:\* word/);
    expect(ids).toEqual([posts[0]?.response?.ts]);
    expect(updates.every((u) => u.body.ts === ids[0])).toBe(true);
    // 2.6 s of progress: the post and at least one edit, then the final edit.
    expect(updates.length).toBeGreaterThanOrEqual(2);
    // At most one start a second from the first progress on: the i-th cannot arrive before i s have
    // passed, and no more can have started than whole seconds fit before finish(). Bounds from this
    // test's own clock, which hold however late the requests arrive on a loaded machine.
    const progressCalls = [posts[0]!, ...updates.slice(0, -1)];
    progressCalls.forEach((call, i) => expect(call.at).toBeGreaterThanOrEqual(t0 + i * 1000));
    expect(progressCalls.length).toBeLessThanOrEqual(1 + Math.floor((finishing - t0) / 1000));
    expect(textOf(updates.at(-1))).toBe('*Answer:* done, see <https://example.com|docs>');
  });

  it('splits a long final answer, keeps code fences balanced, and posts the rest in the thread', async () => {
    h = makeBridge(fake);
    await h.bridge.start();
    fake.reset();
    const writer = h.bridge.reply({ channel: 'C1', thread_ts: '1700.000002' });
    writer.progress('Working on it');
    await until('the first post', () => fake.ok('chat.postMessage').length === 1);
    const prose = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(60);
    const code = Array.from({ length: 120 }, (_, i) => `const value${i} = compute(${i}) < limit && ok;`).join('\n');
    const final = `${prose}\n\n\`\`\`ts\n${code}\n\`\`\`\n\n${prose}`;
    expect(final.length).toBeGreaterThan(9000);
    const ids = await writer.finish(final);

    const posts = fake.ok('chat.postMessage');
    const updates = fake.ok('chat.update');
    expect(ids.length).toBeGreaterThanOrEqual(3);
    expect(updates).toHaveLength(1);
    expect(ids[0]).toBe(updates[0]?.body.ts);
    expect(posts.slice(1).map((p) => p.body.thread_ts)).toEqual(ids.slice(1).map(() => '1700.000002'));
    const parts = [textOf(updates[0]), ...posts.slice(1).map(textOf)];
    expect(parts).toHaveLength(ids.length);
    for (const part of parts) {
      expect(part.length).toBeLessThanOrEqual(3900);
      expect(fenceLines(part) % 2).toBe(0);
    }
    expect(parts.filter((part) => fenceLines(part) > 0).length).toBeGreaterThanOrEqual(2);
    const joined = parts.join('\n');
    for (let i = 0; i < 120; i++) expect(joined).toContain(`const value${i} = compute(${i}) &lt; limit &amp;&amp; ok;`);
  });

  it('ends a notice (answerButtons: false) without the feedback and Regenerate buttons, streamed or posted', async () => {
    const ai = await startFakeSlack({ botToken: BOT_TOKEN, aiApps: true });
    try {
      const streaming = makeBridge(ai);
      await streaming.bridge.start();
      const target = { channel: 'D1', thread_ts: '1700.000010' };
      const notice = streaming.bridge.reply(target);
      notice.progress('A person will reply here.');
      await notice.finish('A person will reply here.', { answerButtons: false });
      await streaming.bridge.reply(target).finish('An answer.');
      await streaming.bridge.stop();
      expect(ai.ok('chat.stopStream').map((c) => (c.body.blocks as Array<{ type: string }> | undefined)?.map((b) => b.type) ?? null)).toEqual([null, ['context_actions', 'actions']]);
    } finally {
      await ai.close();
    }
    h = makeBridge(fake);
    await h.bridge.start();
    fake.reset();
    await h.bridge.reply({ channel: 'C1', thread_ts: '1700.000011' }).finish('A person will reply here.', { answerButtons: false });
    const posted = h.bridge.reply({ channel: 'C1', thread_ts: '1700.000012' });
    posted.progress('Almost');
    await until('the first post', () => fake.ok('chat.postMessage').length === 2);
    await posted.finish('A person will reply here.', { answerButtons: false });
    expect(fake.ok('chat.postMessage').map((c) => c.body.blocks ?? null)).toEqual([null, null]);
    expect(fake.ok('chat.update').map((c) => c.body.blocks ?? null)).toEqual([null]);
  });

  it('fail() replaces the partial text', async () => {
    h = makeBridge(fake);
    await h.bridge.start();
    fake.reset();
    const writer = h.bridge.reply({ channel: 'C1', thread_ts: null });
    writer.progress('Half an ans');
    await until('the first post', () => fake.ok('chat.postMessage').length === 1);
    await writer.fail('Sorry, something went wrong.');
    expect(fake.ok('chat.postMessage')[0]?.body.thread_ts).toBeUndefined();
    expect(fake.ok('chat.update').map(textOf)).toEqual(['Sorry, something went wrong.']);
  });
});

describe('Slack bridge, sends', () => {
  it('waits out a 429 with Retry-After and answers the ts', async () => {
    h = makeBridge(fake);
    await h.bridge.start();
    fake.reset();
    fake.rateLimit('chat.postMessage', 1);
    const sent = await h.bridge.send({ to: 'C1', text: 'Announcement', priority: 'normal' });
    const calls = fake.calls.filter((c) => c.method === 'chat.postMessage');
    expect(calls.map((c) => c.status)).toEqual([429, 200]);
    expect((calls[1]?.at ?? 0) - (calls[0]?.at ?? 0)).toBeGreaterThanOrEqual(1000);
    expect(sent.externalId).toBe(calls[1]?.response?.ts);
  });

  it('sends high priority ahead of queued sends, marked, and splits long sends in a thread', async () => {
    h = makeBridge(fake);
    await h.bridge.start();
    fake.reset();
    fake.rateLimit('chat.postMessage', 1);
    const first = h.bridge.send({ to: 'C1', text: 'first', priority: 'normal' });
    await until('the rate-limited call', () => fake.calls.length === 1);
    const a = h.bridge.send({ to: 'C1', text: 'normal A', priority: 'normal' });
    const b = h.bridge.send({ to: 'C1', text: 'low B', priority: 'low' });
    const c = h.bridge.send({ to: 'C1', text: 'urgent C', priority: 'high', threadId: '1700.000009' });
    await Promise.all([first, a, b, c]);
    expect(fake.ok('chat.postMessage').map(textOf)).toEqual(['first', `${HIGH_PRIORITY_MARK}urgent C`, 'normal A', 'low B']);
    expect(fake.ok('chat.postMessage')[1]?.body.thread_ts).toBe('1700.000009');

    fake.reset();
    const long = await h.bridge.send({ to: 'C2', text: 'x '.repeat(5000), priority: 'normal' });
    const posts = fake.ok('chat.postMessage');
    expect(posts.length).toBe(3);
    expect(posts[0]?.body.thread_ts).toBeUndefined();
    expect(posts.slice(1).map((p) => p.body.thread_ts)).toEqual([long.externalId, long.externalId]);
  });
});
