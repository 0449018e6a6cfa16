import fs from 'node:fs';
import path from 'node:path';
import type { Config } from './config.js';
import { systemActor } from './core/auth/actor.js';
import { type AppContext, configuredEmbedder, createContext } from './context.js';
import { DEFAULT_WORKSPACE } from './core/auth/auth.service.js';
import { detectKind } from './core/knowledge/extract.js';
import type { KnowledgeSource } from './core/knowledge/knowledge.schemas.js';
import { reindexKnowledge } from './core/knowledge/reindex.js';
import { openBackend } from './db/open.js';
import { createLogger } from './lib/logger.js';
import { AppError } from './errors.js';
import { progressBar } from './lib/progress.js';

export interface KnowledgeCliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Whether stderr is a terminal: the progress bar redraws one line instead of printing one per item. */
  isTTY?: boolean;
}

/** Folders skipped when walking: they hold tooling, not documents. */
const SKIPPED_DIRS = new Set(['node_modules', '.git', 'dist', 'build', '.cache']);

interface Item {
  /** What the user named, or the file found in a folder they named. */
  label: string;
  kind: 'file' | 'url';
  target: string;
}

/** The files and URLs to ingest; a file named explicitly is kept even if unsupported (it fails with a reason). */
function collect(inputs: string[]): { items: Item[]; skipped: string[]; missing: string[] } {
  const items: Item[] = [];
  const skipped: string[] = [];
  const missing: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (entry.name.startsWith('.')) continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRS.has(entry.name)) walk(full);
      } else if (entry.isFile()) {
        if (detectKind({ filename: entry.name }) !== null) items.push({ label: full, kind: 'file', target: path.resolve(full) });
        else skipped.push(full);
      }
    }
  };
  for (const input of inputs) {
    if (/^https?:\/\//i.test(input)) {
      items.push({ label: input, kind: 'url', target: input });
      continue;
    }
    const stat = fs.statSync(input, { throwIfNoEntry: false });
    if (!stat) missing.push(input);
    else if (stat.isDirectory()) walk(input);
    else items.push({ label: input, kind: 'file', target: path.resolve(input) });
  }
  return { items, skipped, missing };
}

/** Prints progress on stderr: one redrawn line on a terminal, one line per step otherwise. */
function progressPrinter(io: KnowledgeCliIo) {
  return (done: number, total: number, note: string) => {
    const line = `${progressBar(done, total)} ${note}`;
    if (io.isTTY) io.stderr(`\r\x1b[2K${line.slice(0, 120)}${done === total ? '\n' : ''}`);
    else io.stderr(`${line}\n`);
  };
}

async function workspaceId(ctx: AppContext, name: string, io: KnowledgeCliIo): Promise<string> {
  if (name === DEFAULT_WORKSPACE) {
    // On a fresh data directory, ingest creates the default workspace like `serve` would, and shows its key once.
    const boot = await ctx.services.auth.bootstrap(ctx.config.adminKey);
    if (boot) io.stderr(`Created the "default" workspace; its admin API key (shown once):\n\n    ${boot.key}\n\n`);
  }
  const ws = await ctx.services.auth.findWorkspace(name);
  if (!ws) throw new AppError('not_found', `Workspace "${name}" does not exist; see "switchboard workspaces create".`);
  return ws.id;
}

export interface IngestOptions {
  inputs: string[];
  personaId?: string | undefined;
  workspace?: string | undefined;
  json: boolean;
}

/**
 * `switchboard ingest`: every file (folders walked for supported types) and URL becomes a source of
 * the workspace. Ingesting the same file or URL again replaces that source instead of adding a copy:
 * sources remember where they came from in `metadata.origin`.
 */
export async function runIngest(config: Config, options: IngestOptions, io: KnowledgeCliIo): Promise<number> {
  const { items, skipped, missing } = collect(options.inputs);
  if (missing.length > 0) throw new AppError('not_found', `No such file or folder: ${missing.join(', ')}`);
  const ctx = await createContext(config);
  const started = Date.now();
  const results: Array<{ input: string; source?: KnowledgeSource; error?: string }> = [];
  try {
    const wsId = await workspaceId(ctx, options.workspace ?? DEFAULT_WORKSPACE, io);
    const knowledge = ctx.services.knowledge;
    await knowledge.resumeUnfinished();
    const existing = await knowledge.originIndex(wsId);
    const show = progressPrinter(io);
    show(0, items.length, 'starting');
    for (const [i, item] of items.entries()) {
      try {
        const metadata = { origin: item.target };
        const input =
          item.kind === 'url'
            ? ({ kind: 'url', url: item.target, personaId: options.personaId ?? null, metadata } as const)
            : ({
                kind: 'file',
                file: { filename: path.basename(item.target), mediaType: null, data: fs.readFileSync(item.target) },
                name: path.relative(process.cwd(), item.target) || path.basename(item.target),
                personaId: options.personaId ?? null,
                metadata,
              } as const);
        const previous = existing.get(item.target);
        // The CLI acts as the system (it has no signed-in person): its changes are audited as such.
        const cli = systemActor(wsId, 'switchboard knowledge');
        let source = previous ? await knowledge.update(cli, previous, input) : await knowledge.create(cli, input);
        if (source.status === 'processing') {
          await knowledge.idle();
          source = await knowledge.get(wsId, source.id);
        }
        results.push({ input: item.label, source });
        show(i + 1, items.length, `${item.label}: ${source.status}${source.error ? ` (${source.error})` : `, ${source.chunkCount} chunks`}`);
      } catch (err) {
        const message = err instanceof AppError ? err.message : String((err as Error).message ?? err);
        results.push({ input: item.label, error: message });
        show(i + 1, items.length, `${item.label}: failed (${message})`);
      }
    }
  } finally {
    await ctx.close();
  }
  const ready = results.filter((r) => r.source?.status === 'ready');
  const failed = results.filter((r) => r.source?.status !== 'ready');
  const chunks = ready.reduce((n, r) => n + (r.source?.chunkCount ?? 0), 0);
  const seconds = (Date.now() - started) / 1000;
  if (options.json) {
    io.stdout(
      `${JSON.stringify({
        ready: ready.length,
        failed: failed.map((r) => ({ input: r.input, error: r.error ?? r.source?.error ?? null })),
        skipped,
        chunks,
        seconds,
        sources: ready.map((r) => r.source),
      })}\n`,
    );
  } else {
    const lines = [`Ingested ${ready.length} of ${results.length} in ${seconds.toFixed(1)} s: ${chunks} chunks, searchable now.`];
    for (const r of failed) lines.push(`  failed: ${r.input}: ${r.error ?? r.source?.error ?? 'unknown error'}`);
    if (skipped.length > 0) lines.push(`  skipped ${skipped.length} file(s) of unsupported types (e.g. ${skipped.slice(0, 3).join(', ')})`);
    io.stdout(`${lines.join('\n')}\n`);
  }
  return failed.length > 0 ? 1 : 0;
}

/** `switchboard reindex`: re-embeds every chunk with the configured embedder, with progress. */
export async function runReindex(config: Config, json: boolean, io: KnowledgeCliIo): Promise<number> {
  const backend = await openBackend(config, createLogger('silent'));
  const started = Date.now();
  try {
    const embedder = await configuredEmbedder(config);
    const show = progressPrinter(io);
    const result = await reindexKnowledge(backend.db, backend.knowledge, embedder, (done, total) => show(done, total, 'chunks re-embedded'));
    const seconds = (Date.now() - started) / 1000;
    if (json) io.stdout(`${JSON.stringify({ ...result, embedder: `${embedder.provider}:${embedder.model}`, seconds })}\n`);
    else io.stdout(`Re-embedded ${result.chunks} chunks with ${embedder.provider}:${embedder.model} (${result.dimension ?? '?'} dimensions) in ${seconds.toFixed(1)} s.\n`);
    return 0;
  } finally {
    await backend.close();
  }
}
