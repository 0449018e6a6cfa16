/**
 * `node:http` and `node:https` for the modules that send requests (guarded-fetch.ts, url-fetch.ts).
 * Imported as ES modules, node:http's namespace reads its lazy WebSocket and MessageEvent getters,
 * which load Node's bundled undici: ~30 ms of a loaded core and ~2 MB at every start (issue 23).
 * Required, they load nothing more than the modules themselves.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export const http = require('node:http') as typeof import('node:http');
export const https = require('node:https') as typeof import('node:https');
