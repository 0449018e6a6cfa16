// The product's logger (src/lib/logger.ts) keeps every secret-bearing field out of its lines. The
// integration tests capture the same logger while the server runs; this one hands it each shape of
// secret the paths name, so a lost `redact` or a dropped path fails here whatever the server logs.
import { describe, expect, it } from 'vitest';
import { captureLogs } from '../helpers/mcp-tools.js';

const SECRET = 'sb_SeCrEt0123456789abcdefghijklmnopqrstuvwx';

describe('createLogger', () => {
  it.each([
    ['a request authorization header', { req: { headers: { authorization: `Bearer ${SECRET}` } } }],
    ['a Slack signature', { req: { headers: { 'x-slack-signature': SECRET } } }],
    ['a webhook signature', { req: { headers: { 'x-switchboard-signature': SECRET } } }],
    ['an authorization header', { headers: { authorization: SECRET } }],
    ['a sign-in session cookie', { req: { headers: { cookie: `sb_session=${SECRET}` } } }],
    ['a CSRF token header', { req: { headers: { 'x-csrf-token': SECRET } } }],
    ['a CSRF token', { body: { csrfToken: SECRET } }],
    ['a key', { actor: { key: SECRET } }],
    ['a secret', { channel: { secret: SECRET } }],
    ['credentials, nested', { channel: { credentials: { botToken: SECRET } } }],
    ['credentials, top level', { credentials: { API_TOKEN: SECRET } }],
    ['a bot token', { slack: { botToken: SECRET } }],
    ['an app token', { slack: { appToken: SECRET } }],
    ['a signing secret', { slack: { signingSecret: SECRET } }],
    ['a password', { user: { password: SECRET } }],
    ['an OAuth api_key', { body: { api_key: SECRET } }],
    ['an OAuth code_verifier', { body: { code_verifier: SECRET } }],
    ['an OAuth access_token', { body: { access_token: SECRET } }],
    ['an OAuth refresh_token', { body: { refresh_token: SECRET } }],
    ['an OAuth client_secret', { body: { client_secret: SECRET } }],
    ['a tool server environment', { env: { API_TOKEN: SECRET } }],
    ['a nested tool server environment', { server: { env: { API_TOKEN: SECRET } } }],
    ['tool server headers', { headers: { 'x-api-key': SECRET } }],
    ['a transport requestInit', { transport: { requestInit: { headers: { authorization: SECRET } } } }],
  ])('never prints %s', (_what, fields) => {
    const logs = captureLogs();
    logs.logger.info(fields, 'something happened');
    const line = logs.text();
    expect(line).toContain('something happened');
    expect(line).toContain('[redacted]');
    expect(line).not.toContain(SECRET);
  });

  it('logs at the level it is given', () => {
    const logs = captureLogs();
    logs.logger.trace('finest');
    expect(JSON.parse(logs.text())).toMatchObject({ level: 10, msg: 'finest' });
  });
});
