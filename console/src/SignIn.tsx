/**
 * The pages before a session exists: signing in (a password, or the OIDC provider when the server
 * has one), the first owner's setup link and an invitation's link. The links' tokens are read from
 * the URL's fragment (`#…`, which the browser never sends) and go only into the one request that
 * uses them. Every answer of these calls is the caller's to show: a 401 here is a refusal, not a
 * session that ended.
 */
import { type FormEvent, type ReactNode, useEffect, useState } from 'react';
import { get, request, type SignInMethods } from './api';
import { Field, ProblemView } from './ui';

const MIN_PASSWORD = 12;

/** The server's sign-in methods (public `GET /auth/methods`); null until known or when it failed. */
function useMethods(): SignInMethods | null {
  const [methods, setMethods] = useState<SignInMethods | null>(null);
  useEffect(() => {
    get<SignInMethods>('/auth/methods').then(setMethods, () => setMethods(null));
  }, []);
  return methods;
}

/** `startUrl?…&returnTo=/console/`: the provider's sign-in, coming back to the console. */
const oidcHref = (startUrl: string, extra: Record<string, string> = {}) => `${startUrl}?${new URLSearchParams({ ...extra, returnTo: '/console/' }).toString()}`;

/** The fragment's token (`#sbi_…`), or '' without one. */
const fragmentToken = () => decodeURIComponent(location.hash.replace(/^#/, ''));

function Frame({ title, children }: { title: string; children: ReactNode }) {
  return (
    <main className="signin">
      <h1>{title}</h1>
      {children}
    </main>
  );
}

/** Sends `body` to a sign-in route; `onDone` with the answer's CSRF token when it was a 201. */
function useSubmit(path: string, onDone: (csrfToken: string) => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (body: unknown) => {
    setBusy(true);
    setError(null);
    try {
      const res = await request('POST', path, body, { quiet: true });
      const signedIn = (await res.json()) as { csrfToken: string };
      await onDone(signedIn.csrfToken);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, submit };
}

export function SignInPage({ reason, onSignedIn }: { reason: string | null; onSignedIn: (csrfToken: string) => Promise<void> }) {
  const methods = useMethods();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const { busy, error, submit } = useSubmit('/auth/sessions', onSignedIn);
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    void submit({ email: email.trim(), password });
  };
  return (
    <Frame title="Sign in to Switchboard">
      {reason && (
        <p className="problem" role="alert">
          {reason}
        </p>
      )}
      <form onSubmit={onSubmit} aria-label="Sign in">
        <Field label="E-mail">{(id) => <input id={id} type="email" autoComplete="username" value={email} onChange={(e) => setEmail(e.target.value)} required />}</Field>
        <Field label="Password">
          {(id) => <input id={id} type="password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.target.value)} required />}
        </Field>
        <ProblemView error={error} />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
      {methods?.oidc && (
        <>
          <p className="or muted">or</p>
          <a className="button" href={oidcHref(methods.oidc.startUrl)}>
            Sign in with {methods.oidc.name}
          </a>
        </>
      )}
      <p className="muted">
        No account yet? The first one comes from the setup link the server prints when it starts; anyone else needs an invitation from an admin of the workspace.
      </p>
    </Frame>
  );
}

/** `/console/setup#<token>`: the first owner, from the start banner's link. */
export function SetupPage({ onSignedIn }: { onSignedIn: (csrfToken: string) => Promise<void> }) {
  const [token] = useState(fragmentToken);
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const { busy, error, submit } = useSubmit('/auth/setup', onSignedIn);
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    void submit({ token, name: name.trim(), email: email.trim(), password });
  };
  if (!token) return <NoToken title="Create the first owner" what="setup link the server printed when it started" />;
  return (
    <Frame title="Create the first owner">
      <p>This account owns the workspace. The link works once.</p>
      <form onSubmit={onSubmit} aria-label="Create the first owner">
        <Field label="Name">{(id) => <input id={id} autoComplete="name" value={name} onChange={(e) => setName(e.target.value)} required />}</Field>
        <Field label="E-mail">{(id) => <input id={id} type="email" autoComplete="username" value={email} onChange={(e) => setEmail(e.target.value)} required />}</Field>
        <Field label="Password" hint={`At least ${MIN_PASSWORD} characters.`}>
          {(id) => <input id={id} type="password" autoComplete="new-password" minLength={MIN_PASSWORD} value={password} onChange={(e) => setPassword(e.target.value)} required />}
        </Field>
        <ProblemView error={error} />
        <button type="submit" disabled={busy}>
          Create owner and sign in
        </button>
      </form>
    </Frame>
  );
}

/** `/console/invite#<token>`: joining a workspace by an invitation's link. */
export function InvitePage({ onSignedIn }: { onSignedIn: (csrfToken: string) => Promise<void> }) {
  const methods = useMethods();
  const [token] = useState(fragmentToken);
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const { busy, error, submit } = useSubmit('/auth/invitations/accept', onSignedIn);
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    void submit({ token, name: name.trim(), password });
  };
  if (!token) return <NoToken title="Accept an invitation" what="invitation link you were sent" />;
  return (
    <Frame title="Accept an invitation">
      <p>Choose a name and a password to join the workspace. Already have an account here? Give your own password; your name stays as it is.</p>
      <form onSubmit={onSubmit} aria-label="Accept the invitation">
        <Field label="Name">{(id) => <input id={id} autoComplete="name" value={name} onChange={(e) => setName(e.target.value)} required />}</Field>
        <Field label="Password" hint={`At least ${MIN_PASSWORD} characters.`}>
          {(id) => <input id={id} type="password" autoComplete="new-password" minLength={MIN_PASSWORD} value={password} onChange={(e) => setPassword(e.target.value)} required />}
        </Field>
        <ProblemView error={error} />
        <button type="submit" disabled={busy}>
          Join and sign in
        </button>
      </form>
      {methods?.oidc && (
        <>
          <p className="or muted">or</p>
          <a className="button" href={oidcHref(methods.oidc.startUrl, { invitation: token })}>
            Sign in with {methods.oidc.name}
          </a>
        </>
      )}
    </Frame>
  );
}

function NoToken({ title, what }: { title: string; what: string }) {
  return (
    <Frame title={title}>
      <p className="problem" role="alert">
        This page needs its token: open the whole {what} (the part after # included).
      </p>
      <p>
        <a href="/console/">Sign in instead</a>
      </p>
    </Frame>
  );
}
