import fc from '../helpers/property.js';
import { describe, expect, it } from 'vitest';
import { markdownToMrkdwn, SLACK_PART_LIMIT, slackToPlain, toSlackParts } from '../../bridges/slack/format.js';
import { fenceStateAfter, splitMessage } from '../../bridges/split.js';

describe('markdownToMrkdwn', () => {
  it.each([
    ['**bold** and __also bold__', '*bold* and *also bold*'],
    ['*it* and _it_', '_it_ and _it_'],
    ['~~gone~~', '~gone~'],
    ['see [the docs](https://example.com/a?b=1&c=2)', 'see <https://example.com/a?b=1&amp;c=2|the docs>'],
    ['<https://example.com>', '<https://example.com>'],
    ['# Title', '*Title*'],
    ['### A **bold** heading ##', '*A bold heading*'],
    ['- one\n* two\n  + nested', '• one\n• two\n  • nested'],
    ['> quoted **text**', '> quoted *text*'],
    ['a < b && c > d', 'a &lt; b &amp;&amp; c &gt; d'],
    ['use `**not bold**` here', 'use `**not bold**` here'],
    ['`Vec<T>`', '`Vec&lt;T&gt;`'],
    ['2 * 3 * 4', '2 * 3 * 4'],
    ['snake_case_name', 'snake_case_name'],
    ['---', '──────────'],
  ])('%j → %j', (input, expected) => {
    expect(markdownToMrkdwn(input)).toBe(expected);
  });

  it('leaves code blocks unformatted, drops the language tag and escapes entities inside', () => {
    const md = 'Before **b**\n```ts\nconst x = a ** 2; // **not bold** <T>\n# not a heading\n```\nAfter *i*';
    expect(markdownToMrkdwn(md)).toBe('Before *b*\n```\nconst x = a ** 2; // **not bold** &lt;T&gt;\n# not a heading\n```\nAfter _i_');
  });

  it('closes a code block the model left open', () => {
    expect(markdownToMrkdwn('```\ncode')).toBe('```\ncode\n```');
  });
});

describe('slackToPlain', () => {
  it('removes the bot mention and turns markup into text', () => {
    expect(slackToPlain('<@UBOT> ask <@U2|bob> in <#C1|general> about <https://a.io/x|this> or <https://b.io> &amp; <!here>', 'UBOT')).toBe(
      'ask @bob in #general about this (https://a.io/x) or https://b.io & @here',
    );
  });
  it('keeps a bare-domain link as typed, and other mentions', () => {
    expect(slackToPlain('hey <@UBOT>, is <http://example.com|example.com> up? cc <@U9> <mailto:a@b.io|a@b.io> 1 &lt; 2 &gt; 0', 'UBOT')).toBe(
      'hey , is example.com up? cc @U9 a@b.io 1 < 2 > 0',
    );
  });
  it('decodes &amp;lt; once', () => {
    expect(slackToPlain('&amp;lt;', null)).toBe('&lt;');
  });
});

describe('splitMessage', () => {
  it('leaves a short text alone', () => {
    expect(splitMessage('short', 100)).toEqual(['short']);
  });

  it('cuts at paragraph breaks, then lines, then spaces', () => {
    const text = `${'a'.repeat(60)}\n\n${'b'.repeat(60)}`;
    expect(splitMessage(text, 100)).toEqual(['a'.repeat(60), 'b'.repeat(60)]);
    expect(splitMessage(`${'word '.repeat(30)}`.trim(), 50).every((p) => p.length <= 50 && !p.startsWith(' '))).toBe(true);
  });

  it('closes and reopens a code block cut in the middle', () => {
    const code = Array.from({ length: 40 }, (_, i) => `line ${i}`).join('\n');
    const parts = splitMessage(`intro\n\`\`\`py\n${code}\n\`\`\`\noutro`, 120);
    expect(parts.length).toBeGreaterThan(2);
    for (const part of parts) {
      expect(part.length).toBeLessThanOrEqual(120);
      expect(fenceStateAfter(part, null)).toBeNull();
    }
    expect(parts[1]?.startsWith('```py\n')).toBe(true);
    const lines = parts.join('\n').split('\n');
    for (let i = 0; i < 40; i++) expect(lines).toContain(`line ${i}`);
  });

  it('never splits a surrogate pair on a hard cut', () => {
    const parts = splitMessage('😀'.repeat(100), 33);
    for (const part of parts) expect(part).not.toMatch(/[\ud800-\udbff]$|^[\udc00-\udfff]/);
    expect(parts.join('')).toBe('😀'.repeat(100));
  });

  it('keeps every part within the limit with balanced fences (property)', () => {
    const line = fc.oneof(fc.constant('```'), fc.constant('```js'), fc.string({ maxLength: 80 }), fc.constant(''));
    fc.assert(
      fc.property(fc.array(line, { maxLength: 80 }), fc.integer({ min: 16, max: 200 }), (lines, limit) => {
        const parts = splitMessage(lines.join('\n'), limit);
        for (const part of parts) expect(part.length).toBeLessThanOrEqual(limit);
        // Each part but the last closes what it opened; the last inherits what the text left open.
        for (const part of parts.slice(0, -1)) expect(fenceStateAfter(part, null)).toBeNull();
      }),
      { numRuns: 300 },
    );
  });
});

describe('toSlackParts', () => {
  it('splits converted text at the Slack limit', () => {
    const parts = toSlackParts('**x** '.repeat(2000));
    expect(parts.length).toBe(3); // 8,000 characters of `*x* `
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(SLACK_PART_LIMIT);
    expect(parts[0]?.startsWith('*x* *x*')).toBe(true);
  });
});
