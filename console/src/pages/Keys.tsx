import { type FormEvent, useState } from 'react';
import { api, type ApiKey, get, type List, type Scope } from '../api';
import { useAuth } from '../auth';
import { Empty, Field, Loading, ProblemView, ScopedButton, useAction, useLoad, when } from '../ui';

export function KeysPage() {
  const auth = useAuth();
  const admin = auth.can('admin');
  // Listing keys is an admin call: a lesser key is told so instead of meeting a 403.
  const keys = useLoad(() => (admin ? get<List<ApiKey>>('/auth/api-keys?limit=100') : Promise.resolve(undefined)), [admin]);
  const [secret, setSecret] = useState<{ name: string; key: string } | null>(null);
  const [copied, setCopied] = useState(false);
  const act = useAction();
  const rotate = (k: ApiKey) =>
    act.run(async () => {
      const r = await api<ApiKey & { key: string }>('PUT', `/auth/api-keys/${k.id}`, { gracePeriodSeconds: 0 });
      setSecret({ name: r.name, key: r.key });
      setCopied(false);
      keys.reload();
    });
  const revoke = (k: ApiKey) =>
    act.run(async () => {
      if (!confirm(`Revoke key “${k.name}”? Anything using it stops working at once.`)) return;
      await api('DELETE', `/auth/api-keys/${k.id}`);
      keys.reload();
    });
  return (
    <section>
      <CreateKey
        onCreated={(name, key) => {
          setSecret({ name, key });
          setCopied(false);
          keys.reload();
        }}
      />
      {secret && (
        <div className="panel secret" role="status">
          <h2>Secret of “{secret.name}” — shown once</h2>
          <p>Copy it now: the server keeps only a hash and will never show it again.</p>
          <code data-testid="new-secret">{secret.key}</code>{' '}
          <button
            className="secondary"
            onClick={() =>
              void navigator.clipboard.writeText(secret.key).then(
                () => setCopied(true),
                () => setCopied(false),
              )
            }
          >
            Copy
          </button>
          {copied && <span> Copied.</span>}{' '}
          <button className="secondary" onClick={() => setSecret(null)}>
            I have saved it
          </button>
        </div>
      )}
      <ProblemView error={act.error} />
      <h2>Keys</h2>
      {!admin && <p className="empty">{auth.lacks('admin')} Listing, rotating and revoking every key is for admins.</p>}
      {admin && keys.loading && !keys.data && <Loading what="keys" />}
      <ProblemView error={keys.error} />
      {keys.data?.data.length === 0 && <Empty>No keys.</Empty>}
      {keys.data && keys.data.data.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Prefix</th>
              <th scope="col">Scopes</th>
              <th scope="col">Status</th>
              <th scope="col">Last used</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {keys.data.data.map((k) => (
              <tr key={k.id}>
                <td>
                  {k.name}
                  {k.id === auth.me.key?.id ? ' (this key)' : ''}
                </td>
                <td>
                  <code>{k.prefix}…</code>
                </td>
                <td>{k.scopes.join(', ')}</td>
                <td>
                  <span className={`status ${k.status}`}>{k.status}</span>
                </td>
                <td>{when(k.lastUsedAt)}</td>
                <td className="row">
                  {k.status === 'active' && (
                    <>
                      <ScopedButton scope="admin" className="secondary" onClick={() => void rotate(k)} aria-label={`Rotate ${k.name}`}>
                        Rotate
                      </ScopedButton>
                      <ScopedButton scope="admin" className="danger" onClick={() => void revoke(k)} aria-label={`Revoke ${k.name}`}>
                        Revoke
                      </ScopedButton>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function CreateKey({ onCreated }: { onCreated: (name: string, key: string) => void }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<Scope[]>(['read', 'write']);
  const act = useAction();
  const toggle = (s: Scope) => setScopes(scopes.includes(s) ? scopes.filter((x) => x !== s) : [...scopes, s]);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      const r = await api<ApiKey & { key: string }>('POST', '/auth/api-keys', { name, scopes });
      setName('');
      onCreated(r.name, r.key);
    });
  };
  return (
    <form className="panel" onSubmit={submit} aria-label="New API key">
      <h2>New API key</h2>
      <Field label="Key name">{(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} required />}</Field>
      <fieldset>
        <legend>Scopes</legend>
        {(['read', 'write', 'admin'] as const).map((s) => (
          <label key={s} className="check">
            <input type="checkbox" checked={scopes.includes(s)} onChange={() => toggle(s)} /> {s}
          </label>
        ))}
      </fieldset>
      <ProblemView error={act.error} />
      <ScopedButton scope="admin" type="submit" disabled={act.busy}>
        Create key
      </ScopedButton>
    </form>
  );
}
