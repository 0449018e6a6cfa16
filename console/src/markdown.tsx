import type { ReactNode } from 'react';

/**
 * A tiny Markdown renderer for untrusted text (model output, passages, tool results): paragraphs,
 * fenced and inline code, bold, italic and links — built as React elements, never as HTML, so raw
 * HTML in the text stays text. Links only for http(s) and mailto, opened with noopener noreferrer.
 */
export function safeHref(url: string): string | null {
  try {
    const u = new URL(url, 'https://invalid.example/');
    if (!/^(https?:|mailto:)$/.test(u.protocol) || !/^(https?:|mailto:)/i.test(url.trim())) return null;
    return u.href;
  } catch {
    return null;
  }
}

const INLINE = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*)|(\[[^\]]*\]\([^)\s]*\))/g;

function inline(text: string, keyBase: string): ReactNode[] {
  const out: ReactNode[] = [];
  let last = 0;
  let i = 0;
  for (const m of text.matchAll(INLINE)) {
    const at = m.index ?? 0;
    if (at > last) out.push(text.slice(last, at));
    const tok = m[0];
    const key = `${keyBase}-${i++}`;
    if (m[1]) out.push(<code key={key}>{tok.slice(1, -1)}</code>);
    else if (m[2]) out.push(<strong key={key}>{tok.slice(2, -2)}</strong>);
    else if (m[3]) out.push(<em key={key}>{tok.slice(1, -1)}</em>);
    else {
      const close = tok.indexOf('](');
      const label = tok.slice(1, close);
      const href = safeHref(tok.slice(close + 2, -1));
      out.push(
        href ? (
          <a key={key} href={href} rel="noopener noreferrer" target="_blank">
            {label}
          </a>
        ) : (
          tok
        ),
      );
    }
    last = at + tok.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

export function Markdown({ text }: { text: string }) {
  const blocks: ReactNode[] = [];
  const parts = text.split(/```/);
  parts.forEach((part, pi) => {
    if (pi % 2 === 1) {
      const body = part.replace(/^[^\n]*\n/, '');
      blocks.push(
        <pre key={`c${pi}`}>
          <code>{body}</code>
        </pre>,
      );
      return;
    }
    part
      .split(/\n{2,}/)
      .filter((p) => p.trim() !== '')
      .forEach((para, j) => {
        const lines = para.split('\n');
        blocks.push(
          <p key={`p${pi}-${j}`}>
            {lines.flatMap((line, k) => (k === 0 ? inline(line, `${pi}-${j}-${k}`) : [<br key={`br${k}`} />, ...inline(line, `${pi}-${j}-${k}`)]))}
          </p>,
        );
      });
  });
  return <div className="md">{blocks}</div>;
}
