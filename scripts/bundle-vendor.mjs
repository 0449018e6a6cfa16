// Start-up (issue 40 item 19): a start spends most of its time in Node's module loader, and most
// of the files it loads are two many-file, pure-JS libraries (kysely ~260 files, zod ~100). After
// `tsc`, this bundles them (and fastify-type-provider-zod, which imports zod itself) into a few ES
// modules in dist/vendor/ with esbuild, and points the built server's imports (dist/src) at them.
// One build with shared chunks, so the process holds one copy of each library: what `zod` and
// `fastify-type-provider-zod` (and the two parts of the MCP SDK a start loads) build is the same zod. The sources, their types and the tests that
// run them (vitest) keep importing the packages; only what ships runs the bundles.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** What runs from dist: the server, the bridges and the benchmarks (which import the server's modules). */
const REWRITTEN = ['dist/src', 'dist/bridges', 'dist/bench'].map((dir) => path.join(ROOT, dir));
/** The start-up benchmark's reference: a bare server on the fastify package as it is installed. */
const LEFT_AS_IS = new Set([path.join(ROOT, 'dist/bench/lib/bare-fastify.js')]);
const VENDOR = path.join(ROOT, 'dist/vendor');

/** Specifier → the vendor module it becomes (dist/vendor/<name>.js). */
const BUNDLED = {
  // fastify (CommonJS) and what it requires (avvio, find-my-way, semver, light-my-request, …).
  fastify: 'fastify',
  // The logger, shared with fastify. Its transports (worker threads started from files beside
  // pino's own) are not used: the logger writes to a stream (src/lib/logger.ts).
  pino: 'pino',
  // The knowledge routes' upload parser (CommonJS), with busboy and what else only it uses.
  '@fastify/multipart': 'fastify-multipart',
  kysely: 'kysely',
  'kysely/migration': 'kysely-migration',
  zod: 'zod',
  'fastify-type-provider-zod': 'fastify-type-provider-zod',
  // The OAuth server's client metadata schema (built with the SDK's zod at import) and its errors.
  '@modelcontextprotocol/sdk/shared/auth.js': 'mcp-sdk-shared-auth',
  '@modelcontextprotocol/sdk/server/auth/errors.js': 'mcp-sdk-server-auth-errors',
};

/** Bundled packages written in CommonJS, imported by their default export. */
const COMMONJS = new Set(['fastify', 'pino', '@fastify/multipart']);
const bundled = (specifier) => Object.keys(BUNDLED).some((s) => specifier === s || specifier.startsWith(`${s}/`));
const DEPENDENCIES = new Set(Object.keys(JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).dependencies));

fs.rmSync(VENDOR, { recursive: true, force: true });
fs.mkdirSync(VENDOR, { recursive: true });
const entryPoints = Object.entries(BUNDLED).map(([specifier, name]) => {
  const file = path.join(VENDOR, `.${name}.entry.mjs`);
  // A CommonJS package has no static names to re-export: its default export is its module.exports
  // (as Node gives it to an ES module: the entry is .mjs).
  fs.writeFileSync(file, COMMONJS.has(specifier) ? `export { default } from '${specifier}';\n` : `export * from '${specifier}';\n`);
  return { in: file, out: name };
});
try {
  await build({
    entryPoints,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    outdir: VENDOR,
    chunkNames: 'chunk-[hash]',
    // What the bundled CommonJS code require()s of the packages left out and of Node's built-ins.
    banner: { js: "import { createRequire as __vendorCreateRequire } from 'node:module';\nconst require = __vendorCreateRequire(import.meta.url);" },
    // The project's other dependencies stay the packages they are (fastify's other plugins, the
    // lazily loaded SDKs): one copy each, shared with the code that imports them. What the bundled
    // libraries alone use (avvio, find-my-way, semver, …) goes into the bundle.
    plugins: [
      {
        name: 'dependencies-external',
        setup(b) {
          b.onResolve({ filter: /^[^./]/ }, (args) => {
            if (args.kind === 'entry-point') return undefined;
            const name = args.path.startsWith('@') ? args.path.split('/').slice(0, 2).join('/') : args.path.split('/')[0];
            return DEPENDENCIES.has(name) && !bundled(args.path) ? { path: args.path, external: true } : undefined;
          });
        },
      },
    ],
    legalComments: 'inline',
    logLevel: 'warning',
  });
} finally {
  for (const { in: file } of entryPoints) fs.rmSync(file, { force: true });
}

const specifiers = Object.keys(BUNDLED).map((s) => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&')).join('|');
const statement = new RegExp(`\\bimport\\s+([^'";]+?)\\s+from\\s*(['"])(${specifiers})\\2`, 'g');
/**
 * A vendor module exports what its entry re-exports: a CommonJS package its default alone (Node
 * would also find some named exports in it), an ES package its names and no default. An import the
 * bundle cannot satisfy fails the build here, not the server's start.
 */
function checkImports(file, code) {
  for (const [, clause, , specifier] of code.matchAll(statement)) {
    const named = /[{*]/.test(clause);
    const hasDefault = !clause.trimStart().startsWith('{') && !clause.trimStart().startsWith('*');
    if (COMMONJS.has(specifier) ? named : hasDefault) {
      throw new Error(`bundle-vendor: ${path.relative(ROOT, file)}: \`import ${clause.trim()} from '${specifier}'\`: import ${COMMONJS.has(specifier) ? 'its default export alone' : 'named exports only'} (or change scripts/bundle-vendor.mjs)`);
    }
  }
}
// Points every import of a bundled specifier in what runs from dist at its vendor module.
const pattern = new RegExp(`(\\bfrom\\s*|\\bimport\\s*\\(\\s*)(['"])(${specifiers})\\2`, 'g');
let rewritten = 0;
let pointing = 0;
for (const dir of REWRITTEN) {
  for (const entry of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const file = path.join(entry.parentPath, entry.name);
    if (!entry.isFile() || !entry.name.endsWith('.js') || LEFT_AS_IS.has(file)) continue;
    const code = fs.readFileSync(file, 'utf8');
    checkImports(file, code);
    const next = code.replace(pattern, (_m, lead, quote, specifier) => {
      let rel = path.relative(path.dirname(file), path.join(VENDOR, `${BUNDLED[specifier]}.js`)).split(path.sep).join('/');
      if (!rel.startsWith('.')) rel = `./${rel}`;
      return `${lead}${quote}${rel}${quote}`;
    });
    if (next !== code) {
      fs.writeFileSync(file, next);
      rewritten++;
    }
    if (next.includes('/vendor/')) pointing++;
  }
}
// Run twice on one build, the second run finds the imports already pointing at dist/vendor/.
if (pointing === 0) throw new Error('bundle-vendor: no module in dist imports a bundled package (was tsc run?)');
console.log(`bundle-vendor: ${Object.keys(BUNDLED).join(', ')} → dist/vendor/; ${rewritten} files of dist rewritten, ${pointing} import from it`);
