import { type FormEvent, type MouseEvent, useCallback, useEffect, useState } from 'react';
import { ApiError, clearKey, getKey, type Me, onUnauthorized, request, setKey } from './api';
import { AuthContext, makeAuth } from './auth';
import { AbTestsPage } from './pages/AbTests';
import { AnalyticsPage } from './pages/Analytics';
import { ChannelsPage } from './pages/Channels';
import { EvaluationsPage } from './pages/Evaluations';
import { InboxPage } from './pages/Inbox';
import { KeysPage } from './pages/Keys';
import { KnowledgePage } from './pages/Knowledge';
import { PersonasPage } from './pages/Personas';
import { PlaygroundPage } from './pages/Playground';
import { ToolsPage } from './pages/Tools';

const PAGES = [
  ['personas', 'Personas', PersonasPage],
  ['knowledge', 'Knowledge', KnowledgePage],
  ['playground', 'Playground', PlaygroundPage],
  ['inbox', 'Inbox', InboxPage],
  ['analytics', 'Analytics', AnalyticsPage],
  ['ab-tests', 'A/B tests', AbTestsPage],
  ['evaluations', 'Evaluations', EvaluationsPage],
  ['channels', 'Channels', ChannelsPage],
  ['tools', 'Tools', ToolsPage],
  ['api-keys', 'API keys', KeysPage],
] as const;

const BASE = '/console/';
const pageOf = () => {
  const slug = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length).split('/')[0] : '';
  return PAGES.find((p) => p[0] === slug) ?? PAGES[0];
};

export function App() {
  const [me, setMe] = useState<Me | null>(null);
  const [reason, setReason] = useState<string | null>(null);
  const [checking, setChecking] = useState(() => getKey() !== null);
  const [page, setPage] = useState(pageOf);

  const signOut = useCallback((why: string | null) => {
    clearKey();
    setMe(null);
    setReason(why);
  }, []);

  useEffect(() => {
    onUnauthorized((why) => signOut(`Signed out: ${why}`));
    const onPop = () => setPage(pageOf());
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, [signOut]);

  const signIn = useCallback(async (key: string) => {
    try {
      const res = await request('GET', '/auth/me', undefined, key);
      setKey(key);
      setMe((await res.json()) as Me);
      setReason(null);
    } catch (e) {
      clearKey();
      setReason(e instanceof ApiError ? `Sign-in failed: ${e.message}` : `Sign-in failed: ${String(e)}`);
    }
  }, []);

  useEffect(() => {
    const key = getKey();
    if (key) void signIn(key).finally(() => setChecking(false));
  }, [signIn]);

  useEffect(() => {
    document.title = me ? `${page[1]} · Switchboard` : 'Sign in · Switchboard';
  }, [me, page]);

  if (checking) return <p role="status">Checking your key…</p>;
  if (!me) return <SignIn reason={reason} onSignIn={signIn} />;

  const go = (e: MouseEvent<HTMLAnchorElement>, p: (typeof PAGES)[number]) => {
    if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    history.pushState(null, '', BASE + p[0]);
    setPage(p);
  };
  const Page = page[2];
  return (
    <AuthContext.Provider value={makeAuth(me)}>
      <header className="top">
        <span className="brand">Switchboard</span>
        <span className="who">
          Workspace <strong>{me.workspace.name}</strong> · key <strong>{me.key.name}</strong> ({me.key.prefix}…) · scopes{' '}
          <strong>{me.key.scopes.join(', ')}</strong>
        </span>
        <button className="secondary" onClick={() => signOut('You signed out.')}>
          Sign out
        </button>
      </header>
      <nav aria-label="Main">
        <ul>
          {PAGES.map((p) => (
            <li key={p[0]}>
              <a href={BASE + p[0]} aria-current={p === page ? 'page' : undefined} onClick={(e) => go(e, p)}>
                {p[1]}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main>
        <h1>{page[1]}</h1>
        <Page key={page[0]} />
      </main>
    </AuthContext.Provider>
  );
}

function SignIn({ reason, onSignIn }: { reason: string | null; onSignIn: (key: string) => Promise<void> }) {
  const [key, setValue] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    await onSignIn(key.trim());
    setBusy(false);
  };
  return (
    <main className="signin">
      <h1>Sign in to Switchboard</h1>
      <p>Paste an API key (it starts with sb_). The server printed one when it first started. It is kept in this tab only.</p>
      {reason && (
        <p className="problem" role="alert">
          {reason}
        </p>
      )}
      <form onSubmit={submit}>
        <label htmlFor="key">API key</label>
        <input id="key" type="password" autoComplete="off" value={key} onChange={(e) => setValue(e.target.value)} required />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
