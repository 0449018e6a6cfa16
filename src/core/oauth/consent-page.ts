/**
 * The consent page and the authorization endpoint's error page: server-rendered HTML, inline styles
 * only, no script, no third-party asset. Everything a client chose (its name, URIs) is escaped.
 */
import type { OAuthScope } from './oauth.service.js';

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** Security headers of every page here; `formTarget` is the origin (or scheme) the consent form may end up at. */
export function pageHeaders(formTarget?: string): Record<string, string> {
  // Chromium applies form-action to the redirect that answers the form too, so the client's
  // redirect target is allowed as well as 'self'.
  const formAction = formTarget ? `'self' ${formTarget}` : "'self'";
  return {
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': `default-src 'none'; style-src 'unsafe-inline'; form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'`,
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
    'cache-control': 'no-store',
  };
}

/** The CSP source that matches a redirect URI: its origin for http(s), its scheme otherwise. */
export function formTargetOf(redirectUri: string): string {
  const url = new URL(redirectUri);
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : url.protocol;
}

const STYLE = `
  body { font: 16px/1.5 system-ui, sans-serif; margin: 0; background: #f5f5f7; color: #1d1d1f; }
  main { max-width: 32rem; margin: 3rem auto; background: #fff; border-radius: 12px; padding: 2rem; box-shadow: 0 1px 4px rgba(0,0,0,.1); }
  h1 { font-size: 1.3rem; margin-top: 0; }
  code { background: #f0f0f0; padding: 0 .25rem; border-radius: 4px; word-break: break-all; }
  label { display: block; margin-top: 1rem; font-weight: 600; }
  input[type=password] { width: 100%; box-sizing: border-box; padding: .5rem; font: inherit; margin-top: .25rem; }
  fieldset { border: 0; padding: 0; margin: 1rem 0 0; }
  fieldset label { font-weight: normal; margin-top: .25rem; }
  .buttons { margin-top: 1.5rem; display: flex; gap: .75rem; }
  button { font: inherit; padding: .5rem 1.25rem; border-radius: 8px; border: 1px solid #888; background: #fff; cursor: pointer; }
  button[value=allow] { background: #0a66c2; color: #fff; border-color: #0a66c2; }
  .error { color: #b00020; font-weight: 600; }
  .note { color: #555; font-size: .9rem; }
`;

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="referrer" content="no-referrer"><title>${escapeHtml(title)}</title><style>${STYLE}</style></head>
<body><main>
${body}
</main></body>
</html>
`;
}

export function errorPage(title: string, detail: string): string {
  return page(title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(detail)}</p>\n<p class="note">You can close this window.</p>`);
}

export interface ConsentView {
  pendingId: string;
  csrf: string;
  clientName: string;
  clientId: string;
  /** `metadata` clients are identified by the host of their metadata URL. */
  clientKind: 'metadata' | 'registered';
  redirectUri: string;
  scopes: OAuthScope[];
  error?: string;
}

const SCOPE_TEXT: Record<OAuthScope, string> = {
  read: 'read personas, knowledge, sessions and analytics, and ask personas',
  write: 'create, change and delete personas, knowledge and A/B tests',
};

export function consentPage(view: ConsentView): string {
  const redirect = new URL(view.redirectUri);
  const redirectHost = redirect.protocol === 'http:' || redirect.protocol === 'https:' ? redirect.host : redirect.protocol;
  const verified =
    view.clientKind === 'metadata'
      ? `<p class="note">Identified by its metadata at <code>${escapeHtml(new URL(view.clientId).host)}</code>.</p>`
      : '<p class="note">The name was given by the application itself when it registered; check where it sends you back.</p>';
  const wantsWrite = view.scopes.includes('write');
  const choices = wantsWrite
    ? `<fieldset><legend>Allow it to</legend>
<label><input type="radio" name="scope" value="read write" checked> read and write: ${escapeHtml(SCOPE_TEXT.read)}; ${escapeHtml(SCOPE_TEXT.write)}</label>
<label><input type="radio" name="scope" value="read"> read only: ${escapeHtml(SCOPE_TEXT.read)}</label>
</fieldset>`
    : `<fieldset><legend>Allow it to</legend>
<label><input type="radio" name="scope" value="read" checked> read only: ${escapeHtml(SCOPE_TEXT.read)}</label>
</fieldset>`;
  return page(
    'Connect to Switchboard',
    `<h1>${escapeHtml(view.clientName)} wants to connect to your Switchboard workspace</h1>
${verified}
<p>After you answer you will be sent to <code>${escapeHtml(redirectHost)}</code>.</p>
<p>It asks for: <strong>${escapeHtml(view.scopes.join(' and '))}</strong>. It acts for the workspace of the API key you enter, never with more than that key may do.</p>
${view.error ? `<p class="error" role="alert">${escapeHtml(view.error)}</p>` : ''}
<form method="post" action="authorize/consent">
<input type="hidden" name="request_id" value="${escapeHtml(view.pendingId)}">
<input type="hidden" name="csrf_token" value="${escapeHtml(view.csrf)}">
<label for="api_key">API key</label>
<input id="api_key" name="api_key" type="password" autocomplete="off" spellcheck="false" placeholder="sb_…">
${choices}
<div class="buttons">
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</div>
</form>`,
  );
}
