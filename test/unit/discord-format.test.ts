/** Discord text shaping (bridges/discord/format.ts) and the send queue's ordering. */
import fc from '../helpers/property.js';
import { describe, expect, it } from 'vitest';
import { EMPTY_TEXT, mentionsUser, neutralizeMassMentions, ratingOf, toDiscordParts, toPlainText } from '../../bridges/discord/format.js';
import { SendQueue } from '../../bridges/discord/send-queue.js';
import { UnavailableError } from '../../src/errors.js';

const fences = (part: string) => part.split('\n').filter((line) => /^ {0,3}```/.test(line)).length;
const words = (text: string) => text.split('\n').filter((line) => !/^ {0,3}```/.test(line)).join(' ').split(/\s+/).filter(Boolean);

describe('toDiscordParts', () => {
  it('keeps a short answer as written (Markdown included)', () => {
    expect(toDiscordParts('**bold** _it_ `code`\n> quote')).toEqual(['**bold** _it_ `code`\n> quote']);
  });

  it('never sends an empty message', () => {
    expect(toDiscordParts('')).toEqual([EMPTY_TEXT]);
    expect(toDiscordParts(' \n ')).toEqual([EMPTY_TEXT]);
  });

  it('splits a code block across parts, closing and reopening the fence with its language', () => {
    const code = ['```py', ...Array.from({ length: 120 }, (_, i) => `print(${i})  # a comment to pad the line`), '```'].join('\n');
    const parts = toDiscordParts(`Here:\n\n${code}\n\nDone.`);
    expect(parts.length).toBeGreaterThan(2);
    for (const part of parts) {
      expect(part.length).toBeLessThanOrEqual(2000);
      expect(fences(part) % 2).toBe(0);
    }
    expect(parts[1]!.startsWith('```py\n')).toBe(true);
  });

  it('property: every part ≤ 2,000, fences balanced, no word lost', () => {
    const line = fc.oneof(fc.constant('```'), fc.constant('```js'), fc.string({ maxLength: 120 }).map((s) => s.replace(/`/g, "'")), fc.constant(''));
    fc.assert(
      fc.property(fc.array(line, { maxLength: 200 }), (lines) => {
        const text = lines.join('\n');
        const parts = toDiscordParts(text);
        for (const part of parts) {
          if (part.length > 2000) return false;
          if (fences(part) % 2 !== 0 && fences(text) % 2 === 0) return false;
        }
        return text.trim() === '' || words(parts.join('\n')).join(' ') === words(neutralizeMassMentions(text)).join(' ');
      }),
      { numRuns: 150 },
    );
  });
});

describe('neutralizeMassMentions', () => {
  it('breaks @everyone and @here outside code, leaves fenced code alone', () => {
    expect(neutralizeMassMentions('hi @everyone, @here!\n```\n@everyone\n```\n@heresy')).toBe('hi @\u200beveryone, @\u200bhere!\n```\n@everyone\n```\n@heresy');
  });
});

describe('toPlainText', () => {
  const names = {
    botId: '1',
    user: (id: string) => ({ '2': 'Alice' })[id],
    role: (id: string) => (id === '9' ? null : ({ '8': 'mods' })[id]),
    channel: (id: string) => ({ '5': 'general' })[id],
  };

  it('removes the bot mention (both forms) and leading punctuation', () => {
    expect(toPlainText('<@1> hi', names)).toBe('hi');
    expect(toPlainText('<@!1>, what is this?', names)).toBe('what is this?');
    expect(toPlainText('hey <@1> there', names)).toBe('hey there');
    expect(toPlainText('<@&9> help', names)).toBe('help');
  });

  it('turns mentions, channels, custom emoji and timestamps into text', () => {
    expect(toPlainText('ask <@2> or <@3> and <@&8> in <#5> or <#6> <a:wave:123> <t:0:R>', names)).toBe(
      'ask @Alice or @unknown-user and @mods in #general or #unknown-channel :wave: 1970-01-01T00:00:00.000Z',
    );
  });

  it('keeps code indentation', () => {
    expect(toPlainText('<@1> fix\n```\n    indented\n```', names)).toBe('fix\n```\n    indented\n```');
  });
});

describe('mentionsUser and ratingOf', () => {
  it('finds <@id> and <@!id> only for that id', () => {
    expect(mentionsUser('yo <@1>', '1')).toBe(true);
    expect(mentionsUser('yo <@!1>', '1')).toBe(true);
    expect(mentionsUser('yo <@12>', '1')).toBe(false);
  });

  it('👍 → 5, 👎 → 1 with skin tones, others → null', () => {
    expect([ratingOf('👍'), ratingOf('👍🏿'), ratingOf('👎'), ratingOf('👎🏻'), ratingOf('❤️'), ratingOf(null)]).toEqual([5, 5, 1, 1, null, null]);
  });
});

describe('SendQueue', () => {
  it('runs one at a time: high before normal before low, first come first served within a priority', async () => {
    const queue = new SendQueue(10);
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const job = (name: string, wait?: Promise<void>) => async () => {
      order.push(name);
      await wait;
    };
    const all = [
      queue.push('low', job('first', gate)),
      queue.push('low', job('low1')),
      queue.push('normal', job('normal1')),
      queue.push('high', job('high1')),
      queue.push('normal', job('normal2')),
      queue.push('high', job('high2')),
    ];
    expect(order).toEqual(['first']);
    release();
    await Promise.all(all);
    expect(order).toEqual(['first', 'high1', 'high2', 'normal1', 'normal2', 'low1']);
  });

  it('refuses past its bound, and a failed send does not stop the queue', async () => {
    const queue = new SendQueue(1);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const first = queue.push('normal', () => gate.then(() => Promise.reject(new Error('boom'))));
    const second = queue.push('normal', async () => 'ok');
    await expect(queue.push('high', async () => 'no room')).rejects.toBeInstanceOf(UnavailableError);
    release();
    await expect(first).rejects.toThrow('boom');
    await expect(second).resolves.toBe('ok');
    await queue.idle(100);
    expect(queue.size).toBe(0);
  });
});
