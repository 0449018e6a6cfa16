/** A line diff by longest common subsequence: what the versions view shows for instructions. */
export type DiffLine = { op: 'same' | 'del' | 'add'; text: string };

/** Above this many table cells (old lines × new lines, after the common ends) the diff is "all replaced". */
const MAX_CELLS = 4_000_000;

export function lineDiff(before: string, after: string): DiffLine[] {
  const a = before.split('\n');
  const b = after.split('\n');
  // The common head and tail cost nothing; only the middle needs the table.
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const x = a.slice(head, a.length - tail);
  const y = b.slice(head, b.length - tail);
  const out: DiffLine[] = a.slice(0, head).map((text) => ({ op: 'same', text }));
  if (x.length * y.length > MAX_CELLS) {
    out.push(...x.map((text) => ({ op: 'del' as const, text })), ...y.map((text) => ({ op: 'add' as const, text })));
  } else {
    out.push(...middle(x, y));
  }
  out.push(...a.slice(a.length - tail).map((text) => ({ op: 'same' as const, text })));
  return out;
}

/** LCS lengths of every pair of suffixes, then one walk from the start: removals before additions. */
function middle(x: string[], y: string[]): DiffLine[] {
  const n = x.length;
  const m = y.length;
  const w = m + 1;
  const lcs = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * w + j] = x[i] === y[j] ? lcs[(i + 1) * w + j + 1]! + 1 : Math.max(lcs[(i + 1) * w + j]!, lcs[i * w + j + 1]!);
    }
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) {
      out.push({ op: 'same', text: x[i]! });
      i++;
      j++;
    } else if (lcs[(i + 1) * w + j]! >= lcs[i * w + j + 1]!) {
      out.push({ op: 'del', text: x[i++]! });
    } else {
      out.push({ op: 'add', text: y[j++]! });
    }
  }
  while (i < n) out.push({ op: 'del', text: x[i++]! });
  while (j < m) out.push({ op: 'add', text: y[j++]! });
  return out;
}
