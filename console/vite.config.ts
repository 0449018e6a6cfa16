import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));

// The web console (issue 17): built into dist/console, served by the API process at /console/.
export default defineConfig({
  root: here,
  base: '/console/',
  logLevel: 'warn',
  esbuild: { jsx: 'automatic' },
  // One copy of the AI SDK core: @ai-sdk/react may nest its own patch release of `ai`.
  resolve: { dedupe: ['ai', 'react', 'react-dom'] },
  build: {
    outDir: path.resolve(here, '../dist/console'),
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    // No inline script or data: module preload polyfill: the CSP allows scripts from 'self' only.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    rollupOptions: {
      // Harmless notes from dependencies ("use client" directives, misplaced PURE comments).
      onwarn(warning, warn) {
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE' || warning.code === 'INVALID_ANNOTATION') return;
        warn(warning);
      },
    },
  },
});
