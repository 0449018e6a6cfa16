import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    // Picks the PostgreSQL server once per run (or starts a throwaway one) for the suites that
    // run on both backends.
    globalSetup: ['./test/helpers/postgres-global-setup.ts'],
    exclude: ['dist/**', 'node_modules/**'],
    // Two cores: run files in parallel forks, but never more than the machine has.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
});
