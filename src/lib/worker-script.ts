import fs from 'node:fs';

/**
 * The URL of a worker thread's script `name` (e.g. `search-worker.js`) beside the module at
 * `moduleUrl` (its `import.meta.url`). Compiled (dist/src/...), that is the sibling. Run from the
 * TypeScript sources (vitest), the sibling is a `.ts` file Node cannot start as a thread, so the
 * compiled copy of the same path under `dist/` is used (`npm test` builds first). Null when there
 * is none.
 */
export function workerScript(moduleUrl: string, name: string): URL | null {
  const sibling = new URL(`./${name}`, moduleUrl);
  if (fs.existsSync(sibling)) return sibling;
  if (!moduleUrl.endsWith('.ts')) return null;
  const at = sibling.href.lastIndexOf('/src/');
  if (at === -1) return null;
  const compiled = new URL(`${sibling.href.slice(0, at)}/dist${sibling.href.slice(at)}`);
  return fs.existsSync(compiled) ? compiled : null;
}
