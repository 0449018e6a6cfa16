import { type FormEvent, useState } from 'react';
import { api, ApiError, get, type List, type Persona, qs } from '../api';
import { Empty, Field, Loading, ProblemView, ScopedButton, useAction, useLoad } from '../ui';

const splitList = (s: string) =>
  s
    .split(/[\n,]/)
    .map((x) => x.trim())
    .filter(Boolean);

export function PersonasPage() {
  const [q, setQ] = useState('');
  const list = useLoad(() => get<List<Persona>>(`/personas${qs({ q, limit: 100 })}`), [q]);
  const [editing, setEditing] = useState<Persona | 'new' | null>(null);
  const del = useAction();

  const remove = (p: Persona) =>
    del.run(async () => {
      if (!confirm(`Delete persona “${p.name}”?`)) return;
      try {
        await api('DELETE', `/personas/${p.id}`);
      } catch (e) {
        if (e instanceof ApiError && e.status === 409) {
          throw new ApiError(409, {
            ...e.problem,
            detail: `${e.problem.detail ?? ''} A running A/B test or a channel uses this persona: stop the test or move the channel to another persona first.`,
          });
        }
        throw e;
      }
      list.reload();
    });

  return (
    <section>
      <div className="toolbar">
        <label htmlFor="persona-search">Search personas</label>
        <input id="persona-search" type="search" value={q} onChange={(e) => setQ(e.target.value)} placeholder="Name contains…" />
        <ScopedButton scope="write" onClick={() => setEditing('new')}>
          New persona
        </ScopedButton>
      </div>
      <ProblemView error={del.error} />
      {editing && (
        <PersonaForm
          persona={editing === 'new' ? null : editing}
          onDone={() => {
            setEditing(null);
            list.reload();
          }}
        />
      )}
      {list.loading && !list.data && <Loading what="personas" />}
      <ProblemView error={list.error} />
      {list.data && list.data.data.length === 0 && <Empty>{q ? 'No persona matches that search.' : 'No personas yet — create one with “New persona”.'}</Empty>}
      {list.data && list.data.data.length > 0 && (
        <ul className="cards">
          {list.data.data.map((p) => (
            <li key={p.id} className="card">
              <h2>{p.name}</h2>
              <p className="muted">
                {p.id} · model {p.model ?? 'default'} · tools {p.tools.length ? p.tools.join(', ') : 'none'}
              </p>
              <p className="clip">{p.instructions}</p>
              {p.traits.length > 0 && <p>Traits: {p.traits.join(', ')}</p>}
              <div className="row">
                <ScopedButton scope="write" className="secondary" onClick={() => setEditing(p)} aria-label={`Edit ${p.name}`}>
                  Edit
                </ScopedButton>
                <ScopedButton scope="write" className="danger" onClick={() => void remove(p)} aria-label={`Delete ${p.name}`}>
                  Delete
                </ScopedButton>
              </div>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function PersonaForm({ persona, onDone }: { persona: Persona | null; onDone: () => void }) {
  const [name, setName] = useState(persona?.name ?? '');
  const [instructions, setInstructions] = useState(persona?.instructions ?? '');
  const [traits, setTraits] = useState(persona?.traits.join(', ') ?? '');
  const [model, setModel] = useState(persona?.model ?? '');
  const [tools, setTools] = useState(persona?.tools.join(', ') ?? '');
  const save = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void save.run(async () => {
      const body = { name, instructions, traits: splitList(traits), model: model.trim() || null, tools: splitList(tools) };
      if (persona) await api('PUT', `/personas/${persona.id}`, body);
      else await api('POST', '/personas', body);
      onDone();
    });
  };
  return (
    <form className="panel" onSubmit={submit} aria-label={persona ? `Edit ${persona.name}` : 'New persona'}>
      <h2>{persona ? `Edit ${persona.name}` : 'New persona'}</h2>
      <Field label="Name">{(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} required />}</Field>
      <Field label="Instructions">{(id) => <textarea id={id} rows={4} value={instructions} onChange={(e) => setInstructions(e.target.value)} required />}</Field>
      <Field label="Traits" hint="Comma-separated, e.g. friendly, concise">
        {(id) => <input id={id} value={traits} onChange={(e) => setTraits(e.target.value)} />}
      </Field>
      <Field label="Model" hint="Empty = the server's default">
        {(id) => <input id={id} value={model} onChange={(e) => setModel(e.target.value)} />}
      </Field>
      <Field label="Tools allow-list" hint="Comma-separated tool.action or tool.*, e.g. knowledge.*">
        {(id) => <input id={id} value={tools} onChange={(e) => setTools(e.target.value)} />}
      </Field>
      <ProblemView error={save.error} />
      <div className="row">
        <button type="submit" disabled={save.busy}>
          {persona ? 'Save persona' : 'Create persona'}
        </button>
        <button type="button" className="secondary" onClick={onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}
