import { type FormEvent, useEffect, useState } from 'react';
import { api, get, type List } from '../api';
import { Empty, Field, Loading, ProblemView, ScopedButton, useAction, useLoad, when } from '../ui';

interface Server {
  id: string;
  name: string;
  transport: string;
  url: string | null;
  command: string | null;
  status: string;
  error: string | null;
  credentialNames: string[];
  tools: string[];
  oauth: OAuthState | null;
}
interface OAuthState {
  status: 'connected' | 'needs_consent' | 'error';
  error: string | null;
  issuer: string | null;
  scope: string | null;
  requestedScope: string | null;
  expiresAt: string | null;
}
interface Tool {
  toolName: string;
  action: string;
  description: string | null;
  inputSchema: JsonSchema;
}
interface JsonSchema {
  type?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  description?: string;
  enum?: unknown[];
}
interface Execution {
  id: string;
  toolName: string;
  action: string;
  status: string;
  result: unknown;
  error: unknown;
  durationMs: number;
  startedAt: string;
  monitored: boolean;
  events?: unknown[];
}

const parseCreds = (s: string) =>
  Object.fromEntries(
    s
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .map((l) => [l.slice(0, l.indexOf('=') < 0 ? l.length : l.indexOf('=')).trim(), l.indexOf('=') < 0 ? '' : l.slice(l.indexOf('=') + 1)]),
  );

export function ToolsPage() {
  const servers = useLoad(() => get<List<Server>>('/mcp/servers?limit=100'), []);
  const tools = useLoad(() => get<{ data: Tool[] }>('/mcp/tools'), []);
  const execs = useLoad(() => get<List<Execution>>('/mcp/executions?limit=20'), []);
  const [tool, setTool] = useState('');
  const [connected, setConnected] = useState<string | null>(null);
  // Back from a tool server's consent (/oauth/callback redirects here with ?connected=<name>).
  useEffect(() => {
    const url = new URL(location.href);
    const name = url.searchParams.get('connected');
    if (name === null) return;
    setConnected(name);
    url.searchParams.delete('connected');
    history.replaceState(history.state, '', url.pathname + url.search + url.hash);
  }, []);
  const chosen = tools.data?.data.find((t) => `${t.toolName}.${t.action}` === tool) ?? tools.data?.data[0];
  const act = useAction();
  const remove = (s: Server) =>
    act.run(async () => {
      await api('DELETE', `/mcp/servers/${s.id}`);
      servers.reload();
      tools.reload();
    });
  return (
    <section>
      <Register onDone={() => (servers.reload(), tools.reload())} />
      <h2>Tool servers</h2>
      {connected && <p role="status">Connected {connected}: its tools are ready.</p>}
      {servers.loading && !servers.data && <Loading what="tool servers" />}
      <ProblemView error={servers.error} />
      <ProblemView error={act.error} />
      {servers.data?.data.length === 0 && (
        <Empty>No tool servers registered — the built-in knowledge tool is always there; register an HTTP MCP server above (one that asks for OAuth shows a Connect button).</Empty>
      )}
      <ul className="cards">
        {servers.data?.data.map((s) => (
          <li className="card" key={s.id}>
            <h3>
              {s.name} <small className="muted">({s.transport})</small>
            </h3>
            <p>
              <span className={`status ${s.status}`}>{s.status}</span> {s.error && <span className="muted">— {s.error}</span>}
            </p>
            <p className="muted">
              {s.url ?? s.command} · tools: {s.tools.length ? s.tools.join(', ') : 'none'} · credentials: {s.credentialNames.length ? s.credentialNames.join(', ') : 'none'}
            </p>
            {(s.oauth || s.status === 'needs_consent') && <SignIn server={s} onDone={() => (servers.reload(), tools.reload())} />}
            <Credentials server={s} onDone={servers.reload} />
            <ScopedButton scope="admin" className="danger" onClick={() => void remove(s)} aria-label={`Remove ${s.name}`}>
              Remove
            </ScopedButton>
          </li>
        ))}
      </ul>
      <h2>Run a tool</h2>
      <ProblemView error={tools.error} />
      {tools.data && (
        <>
          <Field label="Tool">
            {(id) => (
              <select id={id} value={chosen ? `${chosen.toolName}.${chosen.action}` : ''} onChange={(e) => setTool(e.target.value)}>
                {tools.data!.data.map((t) => (
                  <option key={`${t.toolName}.${t.action}`} value={`${t.toolName}.${t.action}`}>
                    {t.toolName}.{t.action}
                  </option>
                ))}
              </select>
            )}
          </Field>
          {chosen && <RunForm key={`${chosen.toolName}.${chosen.action}`} tool={chosen} onRan={execs.reload} />}
        </>
      )}
      <h2>Recent executions</h2>
      <ProblemView error={execs.error} />
      {execs.data?.data.length === 0 && <Empty>No executions yet — run a tool above.</Empty>}
      <ul className="plain">
        {execs.data?.data.map((x) => (
          <li key={x.id}>
            <details>
              <summary>
                {x.toolName}.{x.action} — <span className={`status ${x.status}`}>{x.status}</span> in {x.durationMs} ms · {when(x.startedAt)}
              </summary>
              <pre>{JSON.stringify({ result: x.result, error: x.error, events: x.events ?? [] }, null, 2)}</pre>
            </details>
          </li>
        ))}
      </ul>
    </section>
  );
}

function Register({ onDone }: { onDone: () => void }) {
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [creds, setCreds] = useState('');
  const act = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      await api('POST', '/mcp/servers', { name, transport: 'http', url, credentials: parseCreds(creds) });
      setName('');
      setUrl('');
      setCreds('');
      onDone();
    });
  };
  return (
    <form className="panel" onSubmit={submit} aria-label="Register a tool server">
      <h2>Register a tool server (HTTP MCP)</h2>
      <Field label="Server name">{(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} required />}</Field>
      <Field label="Server URL">{(id) => <input id={id} type="url" value={url} onChange={(e) => setUrl(e.target.value)} required />}</Field>
      <Field label="Credentials" hint="One NAME=secret a line; write-only, never shown again">
        {(id) => <textarea id={id} rows={2} value={creds} onChange={(e) => setCreds(e.target.value)} autoComplete="off" />}
      </Field>
      <ProblemView error={act.error} />
      <ScopedButton scope="admin" type="submit" disabled={act.busy}>
        Register server
      </ScopedButton>
    </form>
  );
}

/** A server that signs in with OAuth: its sign-in, Connect (to the authorization server's consent page) and Sign out. */
function SignIn({ server, onDone }: { server: Server; onDone: () => void }) {
  const act = useAction();
  const o = server.oauth;
  const connect = () =>
    act.run(async () => {
      const { authorizationUrl } = await api<{ authorizationUrl: string }>('POST', `/mcp/servers/${server.id}/oauth/authorize`);
      location.assign(authorizationUrl);
    });
  const signOut = () =>
    act.run(async () => {
      await api('DELETE', `/mcp/servers/${server.id}/oauth`);
      onDone();
    });
  const signedIn = o?.status === 'connected' || (o?.scope ?? null) !== null;
  return (
    <div className="row" aria-label={`Sign-in of ${server.name}`}>
      <p>
        OAuth: <span className={`status ${o?.status ?? 'needs_consent'}`}>{o?.status ?? 'needs_consent'}</span>
        {o?.issuer && <span className="muted"> · {o.issuer}</span>}
        {o?.scope && <span className="muted"> · scope {o.scope}</span>}
        {o?.requestedScope && o.status !== 'connected' && <span className="muted"> · asks for {o.requestedScope}</span>}
        {o?.expiresAt && <span className="muted"> · token until {when(o.expiresAt)}</span>}
        {o?.error && server.status !== 'needs_consent' && <span className="muted"> — {o.error}</span>}
      </p>
      <ScopedButton scope="admin" onClick={() => void connect()} disabled={act.busy} aria-label={`Connect ${server.name}`}>
        {signedIn ? 'Reconnect' : 'Connect'}
      </ScopedButton>
      {signedIn && (
        <ScopedButton scope="admin" className="secondary" onClick={() => void signOut()} disabled={act.busy} aria-label={`Sign out of ${server.name}`}>
          Sign out
        </ScopedButton>
      )}
      <ProblemView error={act.error} />
    </div>
  );
}

function Credentials({ server, onDone }: { server: Server; onDone: () => void }) {
  const [creds, setCreds] = useState('');
  const act = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      await api('PUT', `/mcp/servers/${server.id}/credentials`, { credentials: parseCreds(creds) });
      setCreds('');
      onDone();
    });
  };
  return (
    <form onSubmit={submit} className="row">
      <Field label={`New credentials for ${server.name}`} hint="NAME=secret, one a line">
        {(id) => <textarea id={id} rows={1} value={creds} onChange={(e) => setCreds(e.target.value)} autoComplete="off" />}
      </Field>
      <ScopedButton scope="admin" type="submit" className="secondary">
        Replace credentials
      </ScopedButton>
      <ProblemView error={act.error} />
    </form>
  );
}

/** A form built from the tool's JSON Schema: one field per top-level property. */
function RunForm({ tool, onRan }: { tool: Tool; onRan: () => void }) {
  const props = tool.inputSchema.properties ?? {};
  const [values, setValues] = useState<Record<string, string | boolean>>({});
  const [result, setResult] = useState<Execution | null>(null);
  const act = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      const parameters: Record<string, unknown> = {};
      for (const [k, s] of Object.entries(props)) {
        const v = values[k];
        if (v === undefined || v === '') continue;
        if (s.type === 'number' || s.type === 'integer') parameters[k] = Number(v);
        else if (s.type === 'boolean') parameters[k] = v === true;
        else if (s.type === 'object' || s.type === 'array') parameters[k] = JSON.parse(String(v));
        else parameters[k] = v;
      }
      setResult(await api<Execution>('POST', '/mcp/tools/execute', { toolName: tool.toolName, action: tool.action, parameters, monitorExecution: true }));
      onRan();
    });
  };
  return (
    <form className="panel" onSubmit={submit} aria-label={`Run ${tool.toolName}.${tool.action}`}>
      {tool.description && <p className="muted">{tool.description}</p>}
      {Object.entries(props).map(([k, s]) => {
        const required = tool.inputSchema.required?.includes(k) ?? false;
        const label = `${k}${required ? ' (required)' : ''}`;
        if (s.type === 'boolean')
          return (
            <label key={k} className="check">
              <input type="checkbox" checked={values[k] === true} onChange={(e) => setValues({ ...values, [k]: e.target.checked })} /> {label}
            </label>
          );
        return (
          <Field key={k} label={label} hint={s.description ?? (s.type === 'object' || s.type === 'array' ? 'JSON' : undefined)}>
            {(id) =>
              s.enum ? (
                <select id={id} value={String(values[k] ?? '')} onChange={(e) => setValues({ ...values, [k]: e.target.value })} required={required}>
                  <option value="">—</option>
                  {s.enum.map((v) => (
                    <option key={String(v)}>{String(v)}</option>
                  ))}
                </select>
              ) : (
                <input
                  id={id}
                  type={s.type === 'number' || s.type === 'integer' ? 'number' : 'text'}
                  value={String(values[k] ?? '')}
                  onChange={(e) => setValues({ ...values, [k]: e.target.value })}
                  required={required}
                />
              )
            }
          </Field>
        );
      })}
      <ProblemView error={act.error} />
      <ScopedButton scope="write" type="submit" disabled={act.busy}>
        Run tool
      </ScopedButton>
      {result && (
        <div role="status">
          <p>
            <span className={`status ${result.status}`}>{result.status}</span> in {result.durationMs} ms
          </p>
          <pre>{JSON.stringify(result.status === 'failed' ? result.error : result.result, null, 2)}</pre>
        </div>
      )}
    </form>
  );
}
