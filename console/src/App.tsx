import { type MouseEvent, useCallback, useEffect, useState } from 'react';
import { ApiError, type Me, onUnauthorized, request, setCsrfToken } from './api';
import { AuthContext, makeAuth } from './auth';
import { InvitePage, SetupPage, SignInPage } from './SignIn';
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
/** The pages of a link that signs someone in: they come before any session. */
const LINK_PAGES = { setup: SetupPage, invite: InvitePage } as const;
const linkPageOf = (): keyof typeof LINK_PAGES | null => {
  const slug = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length).split('/')[0] : '';
  return slug === 'setup' || slug === 'invite' ? slug : null;
};
const pageOf = () => {
  const slug = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length).split('/')[0] : '';
  return PAGES.find((p) => p[0] === slug) ?? PAGES[0];
};

export function App() {
  const [me, setMe] = useState<Me | null>(null);
  const [reason, setReason] = useState<string | null>(null);
  const [linkPage, setLinkPage] = useState(linkPageOf);
  const [checking, setChecking] = useState(() => linkPage === null);
  const [page, setPage] = useState(pageOf);

  const signedOut = useCallback((why: string | null) => {
    setCsrfToken(null);
    setMe(null);
    setReason(why);
  }, []);

  useEffect(() => {
    onUnauthorized((why) => signedOut(`Signed out: ${why}`));
    const onPop = () => setPage(pageOf());
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, [signedOut]);

  /** Who is signed in, by the cookie: 200 → the console, 401 → the sign-in page. */
  const loadMe = useCallback(async () => {
    try {
      const res = await request('GET', '/auth/me', undefined, { quiet: true });
      const found = (await res.json()) as Me;
      setCsrfToken(found.csrfToken ?? null);
      setMe(found);
      setReason(null);
    } catch (e) {
      setCsrfToken(null);
      setMe(null);
      if (!(e instanceof ApiError && e.status === 401)) setReason(`Could not reach the server: ${e instanceof Error ? e.message : String(e)}`);
    }
  }, []);

  useEffect(() => {
    if (linkPage === null) void loadMe().finally(() => setChecking(false));
  }, [loadMe, linkPage]);

  /** A sign-in, a setup or an accepted invitation answered 201: the cookie is set; on to the console. */
  const signedIn = useCallback(
    async (csrfToken: string) => {
      setCsrfToken(csrfToken);
      if (linkPage !== null) {
        // Off the link's page (and its token out of the address bar and history).
        history.replaceState(null, '', BASE);
        setLinkPage(null);
        setPage(pageOf());
      }
      await loadMe();
    },
    [linkPage, loadMe],
  );

  const signOut = useCallback(async () => {
    try {
      await request('DELETE', '/auth/sessions/current', undefined, { quiet: true });
    } catch {
      // Already ended (401): signed out all the same.
    }
    signedOut('You signed out.');
  }, [signedOut]);

  useEffect(() => {
    document.title = me ? `${page[1]} · Switchboard` : linkPage === 'setup' ? 'Set up · Switchboard' : linkPage === 'invite' ? 'Invitation · Switchboard' : 'Sign in · Switchboard';
  }, [me, page, linkPage]);

  if (linkPage !== null) {
    const LinkPage = LINK_PAGES[linkPage];
    return <LinkPage onSignedIn={signedIn} />;
  }
  if (checking) return <p role="status">Checking your sign-in…</p>;
  if (!me) return <SignInPage reason={reason} onSignedIn={signedIn} />;

  const go = (e: MouseEvent<HTMLAnchorElement>, p: (typeof PAGES)[number]) => {
    if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    history.pushState(null, '', BASE + p[0]);
    setPage(p);
  };
  const Page = page[2];
  const who = me.user ? `${me.user.name} (${me.user.email})` : me.key ? `key ${me.key.name}` : 'unknown';
  return (
    <AuthContext.Provider value={makeAuth(me)}>
      <header className="top">
        <span className="brand">Switchboard</span>
        <span className="who">
          <strong>{who}</strong> · workspace <strong>{me.workspace.name}</strong> · role <strong>{me.role}</strong>
        </span>
        <button className="secondary" onClick={() => void signOut()}>
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
