import { type FormEvent, useState } from 'react';
import { api, type Channel, type ChannelSettings, get, type List, type Persona } from '../api';
import { Empty, Field, Loading, PersonaSelect, ProblemView, ScopedButton, useAction, useLoad, when } from '../ui';

const CREDENTIALS: Record<Channel['type'], string[]> = {
  slack: ['botToken', 'signingSecret', 'appToken'],
  discord: ['botToken'],
  webhook: ['secret', 'outboundUrl'],
};

export function ChannelsPage() {
  const channels = useLoad(() => get<List<Channel>>('/business/channels?limit=100'), []);
  const personas = useLoad(() => get<List<Persona>>('/personas?limit=100'), []);
  const [selected, setSelected] = useState<string | null>(null);
  const nameOf = (id: string | null) => (id ? (personas.data?.data.find((p) => p.id === id)?.name ?? id) : '—');
  return (
    <section>
      <Connect personas={personas.data?.data ?? []} onDone={channels.reload} />
      <h2>Channels</h2>
      {channels.loading && !channels.data && <Loading what="channels" />}
      <ProblemView error={channels.error} />
      {channels.data?.data.length === 0 && <Empty>No channels yet — connect Slack, Discord or a webhook above.</Empty>}
      <ul className="cards">
        {channels.data?.data.map((c) => (
          <li key={c.id} className="card">
            <h3>
              {c.name} <small className="muted">({c.type})</small>
            </h3>
            <p>
              <span className={`status ${c.status}`}>{c.status}</span> {c.statusDetail && <span className="muted">— {c.statusDetail}</span>}
            </p>
            <p className="muted">
              {c.id} · persona {nameOf(c.personaId)}
              {c.abTestId ? ` · A/B test ${c.abTestId}` : ''} · updated {when(c.updatedAt)}
            </p>
            <button className="secondary" onClick={() => setSelected(selected === c.id ? null : c.id)} aria-expanded={selected === c.id} aria-label={`Manage ${c.name}`}>
              Manage
            </button>
            {selected === c.id && <Manage channel={c} onDone={channels.reload} />}
          </li>
        ))}
      </ul>
    </section>
  );
}

function Connect({ personas, onDone }: { personas: Persona[]; onDone: () => void }) {
  const [type, setType] = useState<Channel['type']>('webhook');
  const [name, setName] = useState('');
  const [personaId, setPersonaId] = useState('');
  const [creds, setCreds] = useState<Record<string, string>>({});
  const act = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      const credentials = Object.fromEntries(CREDENTIALS[type].filter((k) => creds[k]).map((k) => [k, creds[k]]));
      await api('POST', '/business/channels', { type, name, personaId, credentials });
      setCreds({});
      setName('');
      onDone();
    });
  };
  return (
    <form className="panel" onSubmit={submit} aria-label="Connect a channel">
      <h2>Connect a channel</h2>
      <Field label="Type">
        {(id) => (
          <select id={id} value={type} onChange={(e) => setType(e.target.value as Channel['type'])}>
            <option value="webhook">Webhook</option>
            <option value="slack">Slack</option>
            <option value="discord">Discord</option>
          </select>
        )}
      </Field>
      <Field label="Channel name">{(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} required />}</Field>
      <PersonaSelect label="Answering persona" personas={personas} value={personaId} onChange={setPersonaId} none="Choose a persona" required />
      <fieldset>
        <legend>Credentials (write-only: never shown again)</legend>
        {CREDENTIALS[type].map((k) => (
          <Field key={`${type}-${k}`} label={k}>
            {(id) => <input id={id} type={k === 'outboundUrl' ? 'url' : 'password'} autoComplete="off" value={creds[k] ?? ''} onChange={(e) => setCreds({ ...creds, [k]: e.target.value })} />}
          </Field>
        ))}
      </fieldset>
      <ProblemView error={act.error} />
      <ScopedButton scope="admin" type="submit" disabled={act.busy}>
        Connect
      </ScopedButton>
    </form>
  );
}

function Manage({ channel, onDone }: { channel: Channel; onDone: () => void }) {
  const [s, setS] = useState<ChannelSettings>(channel.settings);
  const [allowed, setAllowed] = useState(channel.settings.allowedConversations.join(', '));
  const [statuses, setStatuses] = useState(channel.settings.statusMessages.join('\n'));
  const [prompts, setPrompts] = useState(channel.settings.suggestedPrompts.map((p) => `${p.title} | ${p.message}`).join('\n'));
  const [to, setTo] = useState('');
  const [message, setMessage] = useState('Test message from the Switchboard console');
  const [sent, setSent] = useState<string | null>(null);
  const save = useAction();
  const send = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void save.run(async () => {
      const allowedConversations = allowed
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean);
      const slack = channel.type === 'slack';
      const statusMessages = slack ? statuses.split('\n').map((x) => x.trim()).filter(Boolean) : s.statusMessages;
      const suggestedPrompts = slack
        ? prompts
            .split('\n')
            .map((line) => line.trim())
            .filter(Boolean)
            .map((line) => {
              const bar = line.indexOf('|');
              return bar < 0 ? { title: line, message: line } : { title: line.slice(0, bar).trim(), message: line.slice(bar + 1).trim() };
            })
        : s.suggestedPrompts;
      await api('PUT', `/business/channels/${channel.id}/settings`, { ...s, allowedConversations, statusMessages, suggestedPrompts });
      onDone();
    });
  };
  const testSend = (e: FormEvent) => {
    e.preventDefault();
    void send.run(async () => {
      const r = await api<{ externalId: string; status: string }>('POST', `/business/channels/${channel.id}/send`, { to, message });
      setSent(`${r.status}: ${r.externalId}`);
    });
  };
  return (
    <div className="panel">
      <form onSubmit={submit} aria-label={`Settings of ${channel.name}`}>
        <h4>Settings</h4>
        <Field label="Respond to">
          {(id) => (
            <select id={id} value={s.respondTo} onChange={(e) => setS({ ...s, respondTo: e.target.value as ChannelSettings['respondTo'] })}>
              <option value="mentions">mentions only</option>
              <option value="all">all messages</option>
            </select>
          )}
        </Field>
        <label className="check">
          <input type="checkbox" checked={s.replyInThread} onChange={(e) => setS({ ...s, replyInThread: e.target.checked })} /> Reply in thread
        </label>
        <label className="check">
          <input type="checkbox" checked={s.enabled} onChange={(e) => setS({ ...s, enabled: e.target.checked })} /> Enabled
        </label>
        <Field label="Allowed conversations" hint="Comma-separated ids; empty = all">
          {(id) => <input id={id} value={allowed} onChange={(e) => setAllowed(e.target.value)} />}
        </Field>
        {channel.type === 'slack' && (
          <>
            <label className="check">
              <input type="checkbox" checked={s.streaming} onChange={(e) => setS({ ...s, streaming: e.target.checked })} /> Stream answers natively (else post, then edit)
            </label>
            <label className="check">
              <input type="checkbox" checked={s.feedbackButtons} onChange={(e) => setS({ ...s, feedbackButtons: e.target.checked })} /> Feedback buttons under answers
            </label>
            <Field label="Status messages" hint="One per line (up to 10): shown, rotating, while an answer is worked out; empty = “is thinking…”">
              {(id) => <textarea id={id} rows={3} value={statuses} onChange={(e) => setStatuses(e.target.value)} />}
            </Field>
            <Field label="Suggested prompts" hint="One per line (up to 4), “title | message”: offered in a new assistant thread; empty = questions about the persona’s knowledge">
              {(id) => <textarea id={id} rows={3} value={prompts} onChange={(e) => setPrompts(e.target.value)} />}
            </Field>
          </>
        )}
        <ProblemView error={save.error} />
        <ScopedButton scope="write" type="submit">
          Save settings
        </ScopedButton>
      </form>
      <form onSubmit={testSend} aria-label={`Test send on ${channel.name}`}>
        <h4>Test send</h4>
        <Field label="To (conversation id)">{(id) => <input id={id} value={to} onChange={(e) => setTo(e.target.value)} required />}</Field>
        <Field label="Test message">{(id) => <input id={id} value={message} onChange={(e) => setMessage(e.target.value)} required />}</Field>
        <ProblemView error={send.error} />
        {sent && <p role="status">Sent — {sent}</p>}
        <ScopedButton scope="write" type="submit">
          Send test message
        </ScopedButton>
      </form>
    </div>
  );
}
