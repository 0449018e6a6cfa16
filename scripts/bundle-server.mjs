// Start-up (issue 40 item 19): after `tsc` and bundle-vendor.mjs, the server's own ~170 modules
// that a start loads cost the ESM loader more than their code (a resolution, a file read and a
// module record each). This bundles what the built command runs — the CLI and every command it
// imports, the worker threads' scripts — with esbuild into dist/server/: ES modules with code
// splitting, so what each command or feature imports lazily (`await import(...)`: the other
// commands, migrations, extractors, the MCP SDK, …) stays in chunks of its own that load when first
// needed, and a start loads a few dozen files instead of ~170. dist/src/main.js (tsc's, unbundled:
// it turns on the compile cache before anything else loads) imports dist/server/cli.js.
//  - The worker scripts are entries of their own, beside the chunks: a chunk finds them as
//    `new URL('./search-worker.js', import.meta.url)` (src/lib/worker-script.ts), as the unbundled
//    modules find their siblings.
//  - dist/server/modules.json lists the modules of dist (dist/src/…, dist/vendor/…) in each file of
//    dist/server, so test/e2e/startup-modules.test.ts can still tell which of ours a start loaded.
//  - The rest of dist stays as tsc and bundle-vendor.mjs left it: the tests start its worker scripts
//    (src/lib/worker-script.ts) and the benchmarks import its modules.
// Packages stay packages (the project's dependencies are external); the many-file ones come in
// through dist/vendor/, as bundle-vendor.mjs made them, and so do shared chunks of them.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SRC = path.join(ROOT, 'dist/src');
const OUT = path.join(ROOT, 'dist/server');
const MAIN = path.join(SRC, 'main.js');

/** dist/src/main.js's dynamic imports, and the file of dist/server each becomes. */
const FROM_MAIN = { './cli.js': 'cli', './lib/startup-memory.js': 'startup-memory' };
/** Scripts started as worker threads (by `workerScript(import.meta.url, name)`), below dist/src. */
const WORKERS = ['core/knowledge/search-worker.js', 'core/knowledge/ingest-worker.js', 'db/checkpoint-worker.js'];

const fail = (message) => {
  throw new Error(`bundle-server: ${message}`);
};
const DEPENDENCIES = Object.keys(JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).dependencies);
const files = (dir) =>
  fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.js'))
    .map((e) => path.join(e.parentPath, e.name));

// Every worker script the code starts must be an entry, or the bundled server would not find it.
const started = new Set();
for (const file of files(SRC)) {
  for (const [, name] of fs.readFileSync(file, 'utf8').matchAll(/\bworkerScript\(\s*import\.meta\.url\s*,\s*['"]([^'"]+)['"]\s*\)/g)) started.add(name);
}
const entryNames = new Set(WORKERS.map((w) => path.basename(w)));
for (const name of started) if (!entryNames.has(name)) fail(`a module starts the worker script ${name}, which is not in WORKERS (scripts/bundle-server.mjs)`);
if (started.size === 0) fail('no module of dist/src starts a worker script (was tsc run?)');

let main = fs.readFileSync(MAIN, 'utf8');
const entryPoints = [
  ...Object.entries(FROM_MAIN).map(([specifier, out]) => ({ in: path.join(SRC, specifier), out })),
  ...WORKERS.map((w) => ({ in: path.join(SRC, w), out: path.basename(w, '.js') })),
];
for (const { in: file } of entryPoints) if (!fs.existsSync(file)) fail(`${path.relative(ROOT, file)} does not exist (was tsc run?)`);

fs.rmSync(OUT, { recursive: true, force: true });
const result = await build({
  entryPoints,
  absWorkingDir: ROOT,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  outdir: OUT,
  chunkNames: 'chunk-[hash]',
  // The project's dependencies load as the packages they are (one copy each, shared with whatever
  // else imports them); what bundle-vendor.mjs bundled is imported from dist/vendor/ by then.
  external: DEPENDENCIES.flatMap((d) => [d, `${d}/*`]),
  metafile: true,
  legalComments: 'inline',
  logLevel: 'silent',
});
// A warning (an import esbuild cannot follow, e.g. a computed one) fails the build here, not the server.
if (result.warnings.length > 0) fail(`esbuild warned:\n${result.warnings.map((w) => `  ${w.location?.file ?? ''}:${w.location?.line ?? ''} ${w.text}`).join('\n')}`);

/** dist/server file → the modules of dist it holds, relative to dist/. */
const modules = {};
for (const [output, info] of Object.entries(result.metafile.outputs)) {
  if (!output.endsWith('.js')) continue;
  const inputs = Object.keys(info.inputs).map((input) => {
    if (!input.startsWith('dist/')) fail(`${output} holds ${input}, which is not a module of dist`);
    return input.slice('dist/'.length);
  });
  modules[path.relative(OUT, path.join(ROOT, output)).split(path.sep).join('/')] = inputs.sort();
}
fs.writeFileSync(path.join(OUT, 'modules.json'), `${JSON.stringify(modules, null, 1)}\n`);

// dist/src/main.js imports the bundle (a second run on one build finds it done).
for (const [specifier, out] of Object.entries(FROM_MAIN)) {
  const bundled = `import('../server/${out}.js')`;
  if (main.includes(`import('${specifier}')`)) main = main.replace(`import('${specifier}')`, bundled);
  else if (!main.includes(bundled)) fail(`dist/src/main.js has no import('${specifier}'): change FROM_MAIN (scripts/bundle-server.mjs)`);
}
if (/\bimport\s*\(\s*['"]\.\.?\//.test(main.replaceAll(/import\('\.\.\/server\/[^']+'\)/g, ''))) fail('dist/src/main.js imports a module of dist/src that is not in FROM_MAIN');
if (/^\s*import\s[^(]*from\s*['"]\.\.?\//m.test(main)) fail('dist/src/main.js imports a module of dist/src statically: import it dynamically, after the compile cache is on, and add it to FROM_MAIN');
fs.writeFileSync(MAIN, main);

const own = Object.values(modules).flat().filter((m) => m.startsWith('src/')).length;
console.log(`bundle-server: ${own} modules of dist/src in ${Object.keys(modules).length} files of dist/server/ (entries: ${entryPoints.map((e) => e.out).join(', ')})`);
