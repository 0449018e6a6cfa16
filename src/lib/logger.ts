/**
 * The product's one logger: pino JSON at the configured level, with the redaction that keeps keys,
 * secrets and credentials out of every line. The server, `switchboard mcp` (logs on stderr) and the
 * tests that prove nothing secret is logged all build it here.
 */
import pino, { type DestinationStream, type Logger } from 'pino';
import { logContext } from './log-context.js';

/** Paths pino must never print: bearer keys, secrets, credentials. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-slack-signature"]',
  'req.headers["x-switchboard-signature"]',
  'headers.authorization',
  // Sign-in (API.md §14): the session cookie and its CSRF token are credentials too.
  'req.headers.cookie',
  'req.headers["x-csrf-token"]',
  '*.csrfToken',
  '*.key',
  '*.secret',
  '*.credentials',
  '*.botToken',
  '*.appToken',
  '*.signingSecret',
  '*.password',
  // OAuth: nothing logs these bodies today; should anything ever, the secrets in them stay out.
  '*.api_key',
  '*.code_verifier',
  '*.access_token',
  '*.refresh_token',
  '*.client_secret',
  // The OIDC client's secret (config.oidc.clientSecret), should a config object ever be logged.
  '*.clientSecret',
  // MCP tool servers: credentials, the environment and headers they are injected through.
  'credentials',
  'env',
  '*.env',
  'headers',
  '*.requestInit',
];

/** A logger at `level` (pino's names), redacting REDACT_PATHS, writing to `destination` (stdout by default). */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  // The fields of the work under way (log-context.ts: an MCP call's trace context) join every line
  // it writes. A copy each time: pino merges the line's own fields into the object the mixin returns.
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, mixin: () => ({ ...logContext() }) }, destination);
}
