// Preloaded with `--import` (through NODE_OPTIONS) into a built server by
// test/e2e/startup-modules.test.ts: records the URL of every module the process loads (ESM and
// CommonJS alike) and writes them, one a line, to $MODULE_LOG when the process exits, followed by
// Node's own internal modules (process.moduleLoadList, e.g. `NativeModule internal/deps/undici/undici`).
import fs from 'node:fs';
import { registerHooks } from 'node:module';

const loaded = new Set();
registerHooks({
  load(url, context, nextLoad) {
    loaded.add(url);
    return nextLoad(url, context);
  },
});
process.on('exit', () => fs.writeFileSync(process.env.MODULE_LOG, [...loaded, ...process.moduleLoadList].join('\n')));
