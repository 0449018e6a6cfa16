import { type DragEvent, type FormEvent, useEffect, useState } from 'react';
import { api, get, type List, type Persona, qs, type Source, upload } from '../api';
import { Markdown } from '../markdown';
import { Empty, Field, Loading, PersonaSelect, ProblemView, ScopedButton, useAction, useLoad } from '../ui';

interface Chunk {
  id: string;
  position: number;
  text: string;
  headingPath: string[];
  tokens: number;
}
interface Hit {
  chunkId: string;
  sourceName: string;
  text: string;
  score: number;
}

export function KnowledgePage() {
  const list = useLoad(() => get<List<Source>>('/knowledge?limit=100'), []);
  const personas = useLoad(() => get<List<Persona>>('/personas?limit=100'), []);
  const [personaId, setPersonaId] = useState('');
  const [progress, setProgress] = useState<number | null>(null);
  const [dragging, setDragging] = useState(false);
  const [url, setUrl] = useState('');
  const [chunksOf, setChunksOf] = useState<Source | null>(null);
  const act = useAction();
  const processing = list.data?.data.some((s) => s.status === 'processing') ?? false;

  // Status per source until ready: poll while any is still processing.
  useEffect(() => {
    if (!processing) return;
    const t = setTimeout(list.reload, 1000);
    return () => clearTimeout(t);
  }, [processing, list.data, list.reload]);

  const send = (files: FileList | File[]) =>
    act.run(async () => {
      for (const file of Array.from(files)) {
        const form = new FormData();
        if (personaId) form.append('personaId', personaId);
        form.append('file', file, file.name);
        setProgress(0);
        try {
          await upload('/knowledge', form, setProgress);
        } finally {
          setProgress(null);
        }
        list.reload();
      }
    });
  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    setDragging(false);
    if (e.dataTransfer.files.length) void send(e.dataTransfer.files);
  };
  const addUrl = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      await api('POST', '/knowledge', { kind: 'url', url, personaId: personaId || undefined });
      setUrl('');
      list.reload();
    });
  };
  const remove = (s: Source) =>
    act.run(async () => {
      await api('DELETE', `/knowledge/${s.id}`);
      list.reload();
    });

  return (
    <section>
      <div className="panel">
        <h2>Add knowledge</h2>
        <PersonaSelect label="For persona" personas={personas.data?.data} value={personaId} onChange={setPersonaId} none="Shared by every persona" />
        <div
          className={`drop${dragging ? ' over' : ''}`}
          onDragOver={(e) => {
            e.preventDefault();
            setDragging(true);
          }}
          onDragLeave={() => setDragging(false)}
          onDrop={onDrop}
        >
          <p>Drop files here (pdf, docx, md, txt, html, csv, json), or choose them:</p>
          <Field label="Upload files">
            {(id) => (
              <input
                id={id}
                type="file"
                multiple
                accept=".pdf,.docx,.md,.markdown,.txt,.html,.htm,.csv,.json"
                onChange={(e) => e.target.files && void send(e.target.files)}
                disabled={progress !== null}
              />
            )}
          </Field>
          {progress !== null && (
            <progress max={1} value={progress} aria-label="Upload progress">
              {Math.round(progress * 100)} %
            </progress>
          )}
        </div>
        <form className="row" onSubmit={addUrl}>
          <Field label="Web page URL">{(id) => <input id={id} type="url" value={url} onChange={(e) => setUrl(e.target.value)} required placeholder="https://…" />}</Field>
          <ScopedButton scope="write" type="submit">
            Add URL
          </ScopedButton>
        </form>
        <ProblemView error={act.error} />
      </div>

      <h2>Sources</h2>
      {list.loading && !list.data && <Loading what="sources" />}
      <ProblemView error={list.error} />
      {list.data?.data.length === 0 && <Empty>No knowledge yet — upload a file or add a URL above.</Empty>}
      {list.data && list.data.data.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Kind</th>
              <th scope="col">Status</th>
              <th scope="col">Chunks</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {list.data.data.map((s) => (
              <tr key={s.id}>
                <td>{s.name}</td>
                <td>{s.kind}</td>
                <td>
                  <span className={`status ${s.status}`} data-status={s.status}>
                    {s.status}
                  </span>
                  {s.error && <small className="problem-inline"> {s.error}</small>}
                </td>
                <td>{s.chunkCount}</td>
                <td className="row">
                  <button className="secondary" onClick={() => setChunksOf(s)} aria-label={`Chunks of ${s.name}`}>
                    Chunks
                  </button>
                  <ScopedButton scope="write" className="danger" onClick={() => void remove(s)} aria-label={`Delete ${s.name}`}>
                    Delete
                  </ScopedButton>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {chunksOf && <Chunks source={chunksOf} onClose={() => setChunksOf(null)} />}
      <Search />
    </section>
  );
}

function Chunks({ source, onClose }: { source: Source; onClose: () => void }) {
  const chunks = useLoad(() => get<List<Chunk>>(`/knowledge/${source.id}/chunks?limit=100`), [source.id]);
  return (
    <div className="panel">
      <h2>Chunks of {source.name}</h2>
      <button className="secondary" onClick={onClose}>
        Close chunks
      </button>
      {chunks.loading && <Loading what="chunks" />}
      <ProblemView error={chunks.error} />
      {chunks.data?.data.length === 0 && <Empty>No chunks (yet): wait until the source is ready.</Empty>}
      <ol>
        {chunks.data?.data.map((c) => (
          <li key={c.id}>
            <small className="muted">
              {c.headingPath.join(' › ')} · {c.tokens} tokens
            </small>
            <pre className="passage">{c.text}</pre>
          </li>
        ))}
      </ol>
    </div>
  );
}

function Search() {
  const [q, setQ] = useState('');
  const [mode, setMode] = useState('hybrid');
  const [hits, setHits] = useState<Hit[] | null>(null);
  const act = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => setHits((await get<{ data: Hit[] }>(`/knowledge/search${qs({ q, mode, limit: 10 })}`)).data));
  };
  return (
    <div className="panel">
      <h2>Search knowledge</h2>
      <form className="row" onSubmit={submit} role="search">
        <Field label="Search query">{(id) => <input id={id} value={q} onChange={(e) => setQ(e.target.value)} required />}</Field>
        <Field label="Mode">
          {(id) => (
            <select id={id} value={mode} onChange={(e) => setMode(e.target.value)}>
              <option value="hybrid">hybrid</option>
              <option value="keyword">keyword</option>
              <option value="vector">vector</option>
            </select>
          )}
        </Field>
        <button type="submit">Search</button>
      </form>
      <ProblemView error={act.error} />
      {hits?.length === 0 && <Empty>Nothing found. Try another mode or other words.</Empty>}
      <ol>
        {hits?.map((h) => (
          <li key={h.chunkId}>
            <strong>{h.sourceName}</strong> <span className="muted">score {h.score.toFixed(3)}</span>
            <Markdown text={h.text} />
          </li>
        ))}
      </ol>
    </div>
  );
}
