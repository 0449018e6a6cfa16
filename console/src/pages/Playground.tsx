import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, type UIMessage } from 'ai';
import { type FormEvent, useMemo, useRef, useState } from 'react';
import { api, caseQuestion, type Dataset, type DatasetCase, get, type List, type Persona, qs, readProblem, type Session, sessionHeaders, signalUnauthorized } from '../api';
import { useAuth } from '../auth';
import { Markdown } from '../markdown';
import { Empty, Field, Loading, ProblemView, ScopedButton, useAction, useLoad, when } from '../ui';

interface Meta {
  sessionId?: string;
  messageId?: string;
}
interface StoredSession extends Session {
  messages: { id: string; role: 'user' | 'assistant' | 'tool'; content: string }[];
}

/** fetch for the chat transport: a 401 returns to sign-in like every other call. */
const chatFetch: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  if (res.status === 401) {
    const p = await readProblem(res.clone());
    signalUnauthorized(p.detail ?? 'Your session has ended.');
  }
  if (!res.ok) {
    const p = await readProblem(res);
    throw new Error(`${p.title ?? 'Error'} (${res.status})${p.detail ? `: ${p.detail}` : ''}${p.errors?.length ? ` — ${p.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}` : ''}`);
  }
  return res;
};

export function PlaygroundPage() {
  const personas = useLoad(() => get<List<Persona>>('/personas?limit=100'), []);
  const [personaId, setPersonaId] = useState('');
  const chosen = personaId || personas.data?.data[0]?.id || '';
  return (
    <section className="playground">
      {personas.loading && !personas.data && <Loading what="personas" />}
      <ProblemView error={personas.error} />
      {personas.data?.data.length === 0 && <Empty>No personas yet — create one on the Personas page, then talk to it here.</Empty>}
      {personas.data && personas.data.data.length > 0 && (
        <>
          <Field label="Persona">
            {(id) => (
              <select id={id} value={chosen} onChange={(e) => setPersonaId(e.target.value)}>
                {personas.data!.data.map((p) => (
                  <option key={p.id} value={p.id}>
                    {p.name}
                  </option>
                ))}
              </select>
            )}
          </Field>
          {chosen && <Chat key={chosen} personaId={chosen} />}
        </>
      )}
    </section>
  );
}

function Chat({ personaId }: { personaId: string }) {
  const auth = useAuth();
  const sessionRef = useRef<string | null>(null);
  const toolsRef = useRef(true);
  const [useTools, setUseToolsState] = useState(true);
  const setUseTools = (on: boolean) => {
    toolsRef.current = on;
    setUseToolsState(on);
  };
  const [sessionId, setSessionIdState] = useState<string | null>(null);
  const setSessionId = (id: string | null) => {
    sessionRef.current = id;
    setSessionIdState(id);
  };
  const transport = useMemo(
    () =>
      new DefaultChatTransport<UIMessage<Meta>>({
        api: `/api/ai-sdk/agents/${personaId}/chat`,
        headers: (): Record<string, string> => sessionHeaders('POST'),
        body: () => ({ enableMCPTools: toolsRef.current, ...(sessionRef.current ? { sessionId: sessionRef.current } : {}) }),
        fetch: chatFetch,
      }),
    [personaId],
  );
  const sessions = useLoad(() => get<List<Session>>(`/sessions${qs({ personaId, limit: 20 })}`), [personaId, sessionId]);
  const { messages, sendMessage, status, stop, error, setMessages } = useChat<UIMessage<Meta>>({
    id: `playground-${personaId}`,
    transport,
    onFinish: ({ message }) => {
      if (message.metadata?.sessionId && message.metadata.sessionId !== sessionRef.current) setSessionId(message.metadata.sessionId);
      else sessions.reload();
    },
  });
  const [text, setText] = useState('');
  const busy = status === 'submitted' || status === 'streaming';
  const reason = auth.lacks('agent');

  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!text.trim() || busy) return;
    performance.mark('playground-send');
    void sendMessage({ text });
    setText('');
  };
  const reopen = async (id: string) => {
    const s = await get<StoredSession>(`/sessions/${id}`);
    setSessionId(s.id);
    setMessages(
      s.messages
        .filter((m) => m.role === 'user' || m.role === 'assistant')
        .map((m) => ({ id: m.id, role: m.role as 'user' | 'assistant', parts: [{ type: 'text' as const, text: m.content }], metadata: { sessionId: s.id, messageId: m.id } })),
    );
  };
  const fresh = () => {
    setSessionId(null);
    setMessages([]);
  };

  return (
    <div className="chat-layout">
      <div className="chat">
        <div className="messages" aria-live="polite" aria-label="Conversation">
          {messages.length === 0 && <Empty>Ask this persona something: type a message and press Send.</Empty>}
          {messages.map((m) => (
            <ChatMessage key={m.id} message={m} streaming={busy && m === messages[messages.length - 1]} />
          ))}
          {status === 'submitted' && <p className="muted" role="status">Waiting for the answer…</p>}
        </div>
        {error && (
          <div className="problem" role="alert">
            {error.message}
          </div>
        )}
        <form onSubmit={submit} className="composer">
          <Field label="Message">
            {(id) => (
              <textarea
                id={id}
                rows={2}
                value={text}
                onChange={(e) => setText(e.target.value)}
                onKeyDown={(e) => {
                  if (e.key === 'Enter' && !e.shiftKey) submit(e);
                }}
                disabled={!!reason}
              />
            )}
          </Field>
          <label className="check">
            <input type="checkbox" checked={useTools} onChange={(e) => setUseTools(e.target.checked)} /> Allow tool calls (within the allow-list)
          </label>
          <div className="row">
            <ScopedButton scope="agent" type="submit" disabled={busy || !text.trim()}>
              Send
            </ScopedButton>
            {busy && (
              <button type="button" className="danger" onClick={() => void stop()}>
                Stop
              </button>
            )}
            <button type="button" className="secondary" onClick={fresh} disabled={busy}>
              New conversation
            </button>
          </div>
        </form>
      </div>
      <aside aria-label="Session history">
        <h2>History</h2>
        {sessions.data?.data.length === 0 && <Empty>No sessions with this persona yet.</Empty>}
        <ul className="plain">
          {sessions.data?.data.map((s) => (
            <li key={s.id}>
              <button className="link" onClick={() => void reopen(s.id)} aria-current={s.id === sessionId ? 'true' : undefined}>
                {s.title ?? s.id}
              </button>
              <small className="muted">
                {' '}
                {s.messageCount} messages · {when(s.lastMessageAt ?? s.createdAt)}
              </small>
            </li>
          ))}
        </ul>
      </aside>
    </div>
  );
}

function ChatMessage({ message, streaming }: { message: UIMessage<Meta>; streaming: boolean }) {
  const sources = message.parts.filter((p) => p.type === 'source-document');
  return (
    <article className={`msg ${message.role}`} aria-label={message.role === 'user' ? 'You' : 'Answer'}>
      <h3 className="who">{message.role === 'user' ? 'You' : 'Assistant'}</h3>
      {message.parts.map((p, i) => {
        if (p.type === 'text') return <Markdown key={i} text={p.text} />;
        if (p.type === 'dynamic-tool') {
          return (
            <div key={i} className="tool">
              <strong>Tool {p.toolName}</strong> <span className="muted">{p.state}</span>
              <pre>input: {JSON.stringify(p.input, null, 2)}</pre>
              {p.state === 'output-available' && <pre>result: {JSON.stringify(p.output, null, 2)}</pre>}
              {p.state === 'output-error' && <pre className="problem-inline">error: {p.errorText}</pre>}
            </div>
          );
        }
        return null;
      })}
      {sources.length > 0 && (
        <div className="sources">
          <h4>Sources</h4>
          <ol>
            {sources.map((s, i) =>
              s.type === 'source-document' ? (
                <li key={i}>
                  <Passage chunkId={s.sourceId} title={s.title} />
                </li>
              ) : null,
            )}
          </ol>
        </div>
      )}
      {message.role === 'assistant' && !streaming && message.metadata?.sessionId && message.metadata.messageId && (
        <Feedback sessionId={message.metadata.sessionId} messageId={message.metadata.messageId} />
      )}
    </article>
  );
}

/** A source's passage, fetched on demand through the knowledge search API (the chunk's own text). */
function Passage({ chunkId, title }: { chunkId: string; title: string }) {
  const [text, setText] = useState<string | null>(null);
  const act = useAction();
  const show = () =>
    act.run(async () => {
      const hits = await get<{ data: { chunkId: string; text: string }[] }>(`/knowledge/search${qs({ q: title, limit: 50, mode: 'keyword' })}`);
      setText(hits.data.find((h) => h.chunkId === chunkId)?.text ?? '(passage not found by search)');
    });
  return (
    <>
      <span className="source-title">{title}</span>{' '}
      {text === null ? (
        <button className="link" onClick={() => void show()} aria-label={`Show passage of ${title}`}>
          show passage
        </button>
      ) : (
        <Markdown text={text} />
      )}
      <ProblemView error={act.error} />
    </>
  );
}

function Feedback({ sessionId, messageId }: { sessionId: string; messageId: string }) {
  const [rated, setRated] = useState<{ rating: number; label: string } | null>(null);
  const act = useAction();
  const rate = (rating: number, label: string) =>
    act.run(async () => {
      await api('POST', `/sessions/${sessionId}/feedback`, { rating, messageId });
      setRated({ rating, label });
    });
  if (rated)
    return (
      <>
        <p className="muted" role="status">
          Rated {rated.label}. Thanks — it counts in Analytics.
        </p>
        {rated.rating === 1 && <AddToDataset sessionId={sessionId} messageId={messageId} />}
      </>
    );
  return (
    <div className="row feedback">
      <ScopedButton scope="write" className="secondary" onClick={() => void rate(5, 'Helpful')} disabled={act.busy}>
        Helpful
      </ScopedButton>
      <ScopedButton scope="write" className="secondary" onClick={() => void rate(1, 'Not helpful')} disabled={act.busy}>
        Not helpful
      </ScopedButton>
      <ProblemView error={act.error} />
    </div>
  );
}

const REGRESSIONS = 'Regressions';
const NEW = 'new';

/** A badly rated answer as a regression case: into a chosen dataset, or one named "Regressions" made for it. */
function AddToDataset({ sessionId, messageId }: { sessionId: string; messageId: string }) {
  const datasets = useLoad(() => get<List<Dataset>>('/datasets?limit=100'), []);
  // Found by name, so a workspace with more datasets than one page still reuses its "Regressions".
  const named = useLoad(() => get<List<Dataset>>(`/datasets?limit=100&q=${REGRESSIONS}`), []);
  const [choice, setChoice] = useState<string | null>(null);
  const [made, setMade] = useState<{ dataset: string; c: DatasetCase } | null>(null);
  const act = useAction();
  const list = datasets.data?.data ?? [];
  const regressions = named.data?.data.find((d) => d.name === REGRESSIONS) ?? list.find((d) => d.name === REGRESSIONS);
  const value = choice ?? regressions?.id ?? NEW;
  const add = () =>
    act.run(async () => {
      const ds = list.find((d) => d.id === value) ?? (regressions?.id === value ? regressions : undefined) ?? (await api<Dataset>('POST', '/datasets', { name: REGRESSIONS, description: 'Answers rated Not helpful, made into cases from the Playground.' }));
      const c = await api<DatasetCase>('POST', `/datasets/${ds.id}/cases/from-session`, { sessionId, messageId });
      setMade({ dataset: ds.name, c });
    });
  if (made)
    return (
      <div className="panel made-case" role="status" data-testid="made-case">
        <p>
          Added as case {made.c.position} of “{made.dataset}”: <q>{caseQuestion(made.c.case)}</q>
        </p>
        {made.c.case.rubric && <p className="muted">Rubric: {made.c.case.rubric}</p>}
        {made.c.case.tags && <p className="muted">Tags: {made.c.case.tags.join(', ')}</p>}
        <p>
          <a href="/console/evaluations">Open Evaluations</a> to add what a good answer must say, and run it against a new version.
        </p>
      </div>
    );
  return (
    <div className="panel add-case" role="group" aria-label="Add this answer to a dataset">
      <p>Turn this answer into a regression case: its question goes into a dataset, so every run checks it again.</p>
      <div className="row">
        <Field label="Dataset">
          {(id) => (
            <select id={id} value={value} onChange={(e) => setChoice(e.target.value)} disabled={datasets.loading && !datasets.data}>
              {!regressions && <option value={NEW}>New dataset “{REGRESSIONS}”</option>}
              {regressions && !list.some((d) => d.id === regressions.id) && (
                <option value={regressions.id}>
                  {regressions.name} ({regressions.caseCount} {regressions.caseCount === 1 ? 'case' : 'cases'})
                </option>
              )}
              {list.map((d) => (
                <option key={d.id} value={d.id}>
                  {d.name} ({d.caseCount} {d.caseCount === 1 ? 'case' : 'cases'})
                </option>
              ))}
            </select>
          )}
        </Field>
        <ScopedButton scope="write" onClick={() => void add()} disabled={act.busy || (datasets.loading && !datasets.data)}>
          Add to dataset
        </ScopedButton>
      </div>
      <ProblemView error={datasets.error} />
      <ProblemView error={act.error} />
    </div>
  );
}
