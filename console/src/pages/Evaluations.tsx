import { type ChangeEvent, type FormEvent, useEffect, useState } from 'react';
import { api, ApiError, caseQuestion, type Dataset, type DatasetCase, type EvalCase, get, type List, type Persona, qs, request } from '../api';
import { useAuth } from '../auth';
import {
  download,
  Empty,
  Field,
  Loading,
  ms,
  num,
  Pager,
  pct,
  PersonaSelect,
  ProblemView,
  refLabel,
  ScopedButton,
  useAction,
  useCursor,
  useLoad,
  VersionSelect,
  when,
} from '../ui';

type RunStatus = 'queued' | 'running' | 'completed' | 'cancelled' | 'failed';
interface RunSummary {
  cases: number;
  passed: number;
  failed: number;
  errors: number;
  passRate: number | null;
  meanScore: number | null;
  latencyMs: { p50: number | null; p95: number | null };
  tokens: { prompt: number; completion: number };
  scorers: { scorer: string; cases: number; mean: number | null; passed: number | null }[];
  judge: 'used' | 'skipped' | 'off';
}
interface EvalRun {
  id: string;
  datasetId: string;
  personaId: string;
  personaVersion: number;
  status: RunStatus;
  progress: { done: number; total: number };
  concurrency: number;
  judge: boolean;
  summary: RunSummary | null;
  error: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}
interface EvalResult {
  caseId: string;
  position: number;
  /** The case's question; null once the case is deleted. */
  input: string | null;
  passed: boolean | null;
  score: number | null;
  answer: string;
  sources: { sourceId: string; sourceName: string }[];
  scores: { scorer: string; value: number | null; passed: boolean | null; detail?: string }[];
  latencyMs: number;
  tokens: { prompt: number; completion: number };
  error: string | null;
}
interface RunSide {
  runId: string;
  personaId: string;
  personaVersion: number;
  meanScore: number | null;
  passRate: number | null;
}
interface Comparison {
  a: RunSide;
  b: RunSide;
  pairs: number;
  meanDifference: number | null;
  bootstrap: { interval: [number, number] | null; resamples: number; seed: number };
  signTest: { wins: number; losses: number; ties: number; pValue: number | null };
  winner: 'A' | 'B' | null;
  verdict: string;
  changed: { caseId: string; position: number; a: number | null; b: number | null; input: string }[];
}

const ACTIVE: ReadonlySet<RunStatus> = new Set(['queued', 'running']);
/** A scorer's value: milliseconds and tokens are measurements, the rest 0–1 scores. */
const scoreText = (scorer: string, v: number | null | undefined) =>
  v === null || v === undefined ? '—' : /_ms$/.test(scorer) ? `${Math.round(v)} ms` : scorer === 'tokens' ? String(Math.round(v)) : v.toFixed(3);
const signed = (v: number | null | undefined, digits = 3) => (v === null || v === undefined ? '—' : v > 0 ? `+${v.toFixed(digits)}` : v.toFixed(digits));
/** One item a line (phrases may hold commas). */
const lines = (s: string) =>
  s
    .split('\n')
    .map((x) => x.trim())
    .filter(Boolean);
const commas = (s: string) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);

export function EvaluationsPage() {
  const pager = useCursor();
  const datasets = useLoad(() => get<List<Dataset>>(`/datasets${qs({ limit: 20, cursor: pager.cursor })}`), [pager.cursor]);
  const personas = useLoad(() => get<List<Persona>>('/personas?limit=100'), []);
  const [openId, setOpenId] = useState<string | null>(null);
  return (
    <section>
      <p className="muted">
        A dataset holds evaluation cases: a question and what makes an answer good. Run it against a persona version to score every answer, then compare two runs case by
        case.
      </p>
      <CreateDataset
        onCreated={(d) => {
          datasets.reload();
          setOpenId(d.id);
        }}
      />
      <h2>Datasets</h2>
      {datasets.loading && !datasets.data && <Loading what="datasets" />}
      <ProblemView error={datasets.error} />
      {datasets.data?.data.length === 0 && pager.page === 1 && <Empty>No datasets yet — create one above, then add cases or import a JSONL or CSV file.</Empty>}
      {datasets.data && datasets.data.data.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Cases</th>
              <th scope="col">Description</th>
              <th scope="col">Updated</th>
              <th scope="col">
                <span className="visually-hidden">Open</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {datasets.data.data.map((d) => (
              <tr key={d.id} aria-current={d.id === openId ? 'true' : undefined}>
                <th scope="row">{d.name}</th>
                <td>{d.caseCount}</td>
                <td>{d.description ?? '—'}</td>
                <td>{when(d.updatedAt)}</td>
                <td>
                  <button className="secondary" onClick={() => setOpenId(d.id === openId ? null : d.id)} aria-expanded={d.id === openId} aria-label={`${d.id === openId ? 'Close' : 'Open'} ${d.name}`}>
                    {d.id === openId ? 'Close' : 'Open'}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager pager={pager} nextCursor={datasets.data?.nextCursor} what="datasets" />
      {openId && (
        <DatasetView
          key={openId}
          datasetId={openId}
          personas={personas.data?.data ?? []}
          onChanged={datasets.reload}
          onDeleted={() => {
            setOpenId(null);
            datasets.reload();
          }}
        />
      )}
    </section>
  );
}

function CreateDataset({ onCreated }: { onCreated: (d: Dataset) => void }) {
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const act = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      const d = await api<Dataset>('POST', '/datasets', { name, ...(description.trim() ? { description } : {}) });
      setName('');
      setDescription('');
      onCreated(d);
    });
  };
  return (
    <form className="panel" onSubmit={submit} aria-label="New dataset">
      <h2>New dataset</h2>
      <div className="row">
        <Field label="Dataset name">{(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} required maxLength={200} />}</Field>
        <Field label="Description (optional)">{(id) => <input id={id} value={description} onChange={(e) => setDescription(e.target.value)} maxLength={2000} />}</Field>
        <ScopedButton scope="write" type="submit" disabled={act.busy}>
          Create dataset
        </ScopedButton>
      </div>
      <ProblemView error={act.error} />
    </form>
  );
}

/** One dataset: its cases (add, import, export, delete) and its runs (start, watch, results, compare). */
function DatasetView({ datasetId, personas, onChanged, onDeleted }: { datasetId: string; personas: Persona[]; onChanged: () => void; onDeleted: () => void }) {
  const ds = useLoad(() => get<Dataset>(`/datasets/${datasetId}`), [datasetId]);
  const [casesTick, setCasesTick] = useState(0);
  const [runsTick, setRunsTick] = useState(0);
  const act = useAction();
  const casesChanged = () => {
    setCasesTick((t) => t + 1);
    ds.reload();
    onChanged();
  };
  const exportAs = (format: 'jsonl' | 'csv') =>
    act.run(async () => {
      const res = await request('GET', `/datasets/${datasetId}/export${qs({ format })}`);
      const named = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1];
      download(await res.blob(), named ?? `${datasetId}.${format}`);
    });
  const remove = (d: Dataset) =>
    act.run(async () => {
      if (!confirm(`Delete dataset “${d.name}” with its ${d.caseCount} cases and every run over it?`)) return;
      await api('DELETE', `/datasets/${d.id}`);
      onDeleted();
    });
  if (ds.loading && !ds.data) return <Loading what="the dataset" />;
  if (ds.error || !ds.data) return <ProblemView error={ds.error} />;
  const d = ds.data;
  return (
    <section className="panel dataset" aria-label={`Dataset ${d.name}`}>
      <h2>{d.name}</h2>
      <p className="muted">
        {d.id} · {d.caseCount} {d.caseCount === 1 ? 'case' : 'cases'} · created {when(d.createdAt)}
        {d.description ? ` · ${d.description}` : ''}
      </p>
      <div className="row">
        <ScopedButton scope="read" className="secondary" onClick={() => void exportAs('jsonl')} aria-label={`Export JSONL of ${d.name}`}>
          Export JSONL
        </ScopedButton>
        <ScopedButton scope="read" className="secondary" onClick={() => void exportAs('csv')} aria-label={`Export CSV of ${d.name}`}>
          Export CSV
        </ScopedButton>
        <ScopedButton scope="write" className="danger" onClick={() => void remove(d)} aria-label={`Delete dataset ${d.name}`}>
          Delete dataset
        </ScopedButton>
      </div>
      <ProblemView error={act.error} />

      <h3>Cases</h3>
      <CasesList datasetId={d.id} tick={casesTick} onChanged={casesChanged} />
      <div className="two-columns">
        <AddCase datasetId={d.id} onAdded={casesChanged} />
        <ImportCases datasetId={d.id} onImported={casesChanged} />
      </div>

      <h3>Runs</h3>
      {d.caseCount === 0 ? (
        <Empty>Add or import cases first: a run answers each one.</Empty>
      ) : (
        <StartRun datasetId={d.id} personas={personas} onStarted={() => setRunsTick((t) => t + 1)} />
      )}
      <Runs dataset={d} personas={personas} tick={runsTick} />
    </section>
  );
}

/** What makes an answer good, in short. */
function checksOf(c: EvalCase): string[] {
  const out: string[] = [];
  const clip = (s: string) => (s.length > 80 ? `${s.slice(0, 80)}…` : s);
  if (c.expected) out.push(`expected: “${clip(c.expected)}”`);
  if (c.mustContain?.length) out.push(`must contain: ${c.mustContain.join(', ')}`);
  if (c.mustNotContain?.length) out.push(`must not contain: ${c.mustNotContain.join(', ')}`);
  if (c.regex) out.push(`matches ${c.regex}`);
  if (c.expectedSources?.length) out.push(`sources: ${c.expectedSources.join(', ')}`);
  if (c.jsonSchema) out.push('valid against a JSON schema');
  if (c.rubric) out.push(`rubric: ${clip(c.rubric)}`);
  return out;
}

function CasesList({ datasetId, tick, onChanged }: { datasetId: string; tick: number; onChanged: () => void }) {
  const pager = useCursor();
  const cases = useLoad(() => get<List<DatasetCase>>(`/datasets/${datasetId}/cases${qs({ limit: 20, cursor: pager.cursor })}`), [datasetId, pager.cursor, tick]);
  const act = useAction();
  const remove = (c: DatasetCase) =>
    act.run(async () => {
      if (!confirm(`Delete case ${c.position} (“${caseQuestion(c.case).slice(0, 80)}”)?`)) return;
      await api('DELETE', `/datasets/${datasetId}/cases/${c.id}`);
      onChanged();
    });
  if (cases.loading && !cases.data) return <Loading what="cases" />;
  return (
    <>
      <ProblemView error={cases.error} />
      <ProblemView error={act.error} />
      {cases.data?.data.length === 0 && pager.page === 1 && <Empty>No cases yet — add one below or import a file.</Empty>}
      {cases.data && cases.data.data.length > 0 && (
        <table className="cases" data-testid="cases">
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Question</th>
              <th scope="col">What a good answer does</th>
              <th scope="col">Tags</th>
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {cases.data.data.map((c) => (
              <tr key={c.id}>
                <th scope="row">{c.position}</th>
                <td className="pre">{caseQuestion(c.case)}</td>
                <td>
                  {checksOf(c.case).length === 0 ? (
                    <span className="muted">no checks (latency and tokens only)</span>
                  ) : (
                    <ul className="plain">
                      {checksOf(c.case).map((x, i) => (
                        <li key={i}>{x}</li>
                      ))}
                    </ul>
                  )}
                </td>
                <td>
                  {c.case.tags?.join(', ') ?? ''}
                  {c.sessionId && <div className="muted">from session {c.sessionId}</div>}
                </td>
                <td>
                  <ScopedButton scope="write" className="danger" onClick={() => void remove(c)} aria-label={`Delete case ${c.position}`}>
                    Delete
                  </ScopedButton>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager pager={pager} nextCursor={cases.data?.nextCursor} what="cases" />
    </>
  );
}

function AddCase({ datasetId, onAdded }: { datasetId: string; onAdded: () => void }) {
  const empty = { input: '', expected: '', mustContain: '', mustNotContain: '', regex: '', expectedSources: '', rubric: '', tags: '' };
  const [f, setF] = useState(empty);
  const act = useAction();
  const set = (k: keyof typeof empty) => (e: ChangeEvent<HTMLInputElement | HTMLTextAreaElement>) => setF({ ...f, [k]: e.target.value });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      const c: EvalCase = { input: f.input };
      if (f.expected.trim()) c.expected = f.expected;
      if (lines(f.mustContain).length) c.mustContain = lines(f.mustContain);
      if (lines(f.mustNotContain).length) c.mustNotContain = lines(f.mustNotContain);
      if (f.regex.trim()) c.regex = f.regex.trim();
      if (lines(f.expectedSources).length) c.expectedSources = lines(f.expectedSources);
      if (f.rubric.trim()) c.rubric = f.rubric;
      if (commas(f.tags).length) c.tags = commas(f.tags);
      await api('POST', `/datasets/${datasetId}/cases`, c);
      setF(empty);
      onAdded();
    });
  };
  return (
    <form className="panel" onSubmit={submit} aria-label="Add a case">
      <h4>Add a case</h4>
      <Field label="Question">{(id) => <textarea id={id} rows={2} value={f.input} onChange={set('input')} required />}</Field>
      <Field label="Expected answer" hint="Optional: scored by exact match and containment">
        {(id) => <textarea id={id} rows={2} value={f.expected} onChange={set('expected')} />}
      </Field>
      <Field label="Must contain" hint="One phrase a line (case-insensitive)">
        {(id) => <textarea id={id} rows={2} value={f.mustContain} onChange={set('mustContain')} />}
      </Field>
      <Field label="Must not contain" hint="One phrase a line">
        {(id) => <textarea id={id} rows={2} value={f.mustNotContain} onChange={set('mustNotContain')} />}
      </Field>
      <Field label="Regex" hint="pattern or /pattern/flags (flags from imsu)">
        {(id) => <input id={id} value={f.regex} onChange={set('regex')} />}
      </Field>
      <Field label="Expected sources" hint="Knowledge source names or ids, one a line">
        {(id) => <textarea id={id} rows={2} value={f.expectedSources} onChange={set('expectedSources')} />}
      </Field>
      <Field label="Rubric" hint="Grading instructions for the LLM judge">
        {(id) => <textarea id={id} rows={2} value={f.rubric} onChange={set('rubric')} />}
      </Field>
      <Field label="Tags" hint="Comma-separated">
        {(id) => <input id={id} value={f.tags} onChange={set('tags')} />}
      </Field>
      <ProblemView error={act.error} />
      <ScopedButton scope="write" type="submit" disabled={act.busy}>
        Add case
      </ScopedButton>
    </form>
  );
}

/** "line 2: must compile…" at `cases.1.regex` → line 2, field regex. */
function importProblem(e: { path: string; message: string }) {
  const at = /^(line|row) (\d+): ([\s\S]*)$/.exec(e.message);
  const field = e.path.replace(/^cases(\.\d+)?\.?/, '');
  return { where: at ? `${at[1] === 'line' ? 'Line' : 'Row'} ${at[2]}` : null, field: field || null, message: at ? at[3]! : e.message };
}

function ImportCases({ datasetId, onImported }: { datasetId: string; onImported: () => void }) {
  const auth = useAuth();
  const reason = auth.lacks('write');
  const [format, setFormat] = useState<'' | 'jsonl' | 'csv'>('');
  const [done, setDone] = useState<string | null>(null);
  const [failed, setFailed] = useState<{ file: string; error: unknown } | null>(null);
  const [busy, setBusy] = useState(false);
  const send = async (e: ChangeEvent<HTMLInputElement>) => {
    const input = e.target;
    const file = input.files?.[0];
    if (!file) return;
    setBusy(true);
    setDone(null);
    setFailed(null);
    try {
      const as = format || (/\.csv$/i.test(file.name) ? 'csv' : 'jsonl');
      const r = await api<{ imported: number; dataset: Dataset }>('POST', `/datasets/${datasetId}/import`, { format: as, content: await file.text() });
      setDone(`Imported ${r.imported} ${r.imported === 1 ? 'case' : 'cases'} from ${file.name}; the dataset now holds ${r.dataset.caseCount}.`);
      onImported();
    } catch (error) {
      setFailed({ file: file.name, error });
    } finally {
      setBusy(false);
      input.value = '';
    }
  };
  const problem = failed?.error instanceof ApiError && failed.error.status === 400 && failed.error.problem.errors?.length ? failed.error.problem : null;
  return (
    <div className="panel" role="group" aria-label="Import cases">
      <h4>Import cases</h4>
      <p className="muted">
        JSONL: one case a line, e.g. <code>{'{"input":"How long do refunds take?","mustContain":["5 business days"]}'}</code>. CSV: a header row with columns such as
        input, expected, mustContain (items separated by |), rubric, tags. All or nothing: a file with a bad case adds none.
      </p>
      <Field label="File format">
        {(id) => (
          <select id={id} value={format} onChange={(e) => setFormat(e.target.value as typeof format)}>
            <option value="">From the file name (.csv is CSV, else JSONL)</option>
            <option value="jsonl">JSONL</option>
            <option value="csv">CSV</option>
          </select>
        )}
      </Field>
      <Field label="Import a JSONL or CSV file">
        {(id) => <input id={id} type="file" accept=".jsonl,.ndjson,.json,.csv,.txt" onChange={(e) => void send(e)} disabled={busy || !!reason} />}
      </Field>
      {reason && <small className="reason">{reason}</small>}
      {busy && <p role="status">Importing…</p>}
      {done && (
        <p role="status" className="ok">
          {done}
        </p>
      )}
      {problem && (
        <div className="problem" role="alert" data-testid="import-errors">
          <strong>Nothing was imported from {failed!.file}</strong>: {problem.detail ?? 'some cases do not pass.'}
          <ul>
            {problem.errors!.map((e, i) => {
              const p = importProblem(e);
              return (
                <li key={i}>
                  {p.where && <strong>{p.where}</strong>}
                  {p.where && p.field ? ', ' : ''}
                  {p.field && (
                    <>
                      field <code>{p.field}</code>
                    </>
                  )}
                  {p.where || p.field ? ': ' : ''}
                  {p.message}
                </li>
              );
            })}
          </ul>
        </div>
      )}
      {failed && !problem && <ProblemView error={failed.error} />}
    </div>
  );
}

function StartRun({ datasetId, personas, onStarted }: { datasetId: string; personas: Persona[]; onStarted: () => void }) {
  const [personaId, setPersonaId] = useState('');
  const [version, setVersion] = useState('');
  const [concurrency, setConcurrency] = useState('4');
  const [judge, setJudge] = useState(true);
  const act = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      await api('POST', '/evaluations/runs', { datasetId, personaId: version ? `${personaId}@${version}` : personaId, concurrency: Number(concurrency), judge });
      onStarted();
    });
  };
  return (
    <form className="panel" onSubmit={submit} aria-label="Start a run">
      <h4>Start a run</h4>
      {personas.length === 0 && <p className="empty">A run needs a persona — create one on the Personas page.</p>}
      <div className="row">
        <PersonaSelect
          label="Persona to run"
          personas={personas}
          value={personaId}
          onChange={(id) => {
            setPersonaId(id);
            setVersion('');
          }}
          none="Choose a persona"
          required
        />
        <VersionSelect label="Persona version" personaId={personaId} value={version} onChange={setVersion} current="Current version" />
        <Field label="Cases at once (1–16)">
          {(id) => <input id={id} type="number" min={1} max={16} step={1} value={concurrency} onChange={(e) => setConcurrency(e.target.value)} required />}
        </Field>
      </div>
      <label className="check">
        <input type="checkbox" checked={judge} onChange={(e) => setJudge(e.target.checked)} /> Grade cases that have a rubric with the LLM judge
      </label>
      <ProblemView error={act.error} />
      <ScopedButton scope="write" type="submit" disabled={act.busy || !personaId}>
        Start run
      </ScopedButton>
    </form>
  );
}

/** The dataset's runs, polled every second while one is queued or running. */
function Runs({ dataset, personas, tick }: { dataset: Dataset; personas: Persona[]; tick: number }) {
  const pager = useCursor();
  const runs = useLoad(() => get<List<EvalRun>>(`/evaluations/runs${qs({ datasetId: dataset.id, limit: 20, cursor: pager.cursor })}`), [dataset.id, pager.cursor, tick]);
  const [open, setOpen] = useState<string | null>(null);
  const act = useAction();
  const active = runs.data?.data.some((r) => ACTIVE.has(r.status)) ?? false;
  useEffect(() => {
    if (!active) return;
    const t = setTimeout(runs.reload, 1000);
    return () => clearTimeout(t);
  }, [active, runs.data, runs.reload]);
  const label = (r: EvalRun) => refLabel(`${r.personaId}@${r.personaVersion}`, personas);
  const cancel = (r: EvalRun) =>
    act.run(async () => {
      await api('POST', `/evaluations/runs/${r.id}/cancel`);
      runs.reload();
    });
  if (runs.loading && !runs.data) return <Loading what="runs" />;
  const list = runs.data?.data ?? [];
  const opened = list.find((r) => r.id === open);
  return (
    <>
      <ProblemView error={runs.error} />
      <ProblemView error={act.error} />
      {list.length === 0 && pager.page === 1 && <Empty>No runs over this dataset yet.</Empty>}
      {list.length > 0 && (
        <table className="runs" data-testid="runs">
          <thead>
            <tr>
              <th scope="col">Run</th>
              <th scope="col">Status</th>
              <th scope="col">Outcome</th>
            </tr>
          </thead>
          <tbody>
            {list.map((r) => (
              <tr key={r.id} data-run={r.id}>
                <th scope="row">
                  {label(r)}
                  <div className="muted">{r.id}</div>
                  <div className="muted">started {when(r.startedAt ?? r.createdAt)}</div>
                </th>
                <td>
                  <span className={`status ${r.status}`} data-status={r.status}>
                    {r.status}
                  </span>
                  <div>
                    <progress max={Math.max(1, r.progress.total)} value={r.progress.done} aria-label={`Progress of ${label(r)} run`} />{' '}
                    <span className="nowrap">
                      {r.progress.done} / {r.progress.total}
                    </span>
                  </div>
                  {r.error && <div className="problem-inline">{r.error}</div>}
                  <div className="row">
                    <button className="secondary" onClick={() => setOpen(open === r.id ? null : r.id)} aria-expanded={open === r.id} aria-label={`Results of ${label(r)} run ${r.id}`}>
                      Results
                    </button>
                    {ACTIVE.has(r.status) && (
                      <ScopedButton scope="write" className="danger" onClick={() => void cancel(r)} aria-label={`Cancel ${label(r)} run ${r.id}`}>
                        Cancel
                      </ScopedButton>
                    )}
                  </div>
                </td>
                <td>
                  {r.summary ? (
                    <ul className="plain tight">
                      <li>
                        {r.summary.passed} of {r.summary.cases} passed ({pct(r.summary.passRate, 0)})
                      </li>
                      <li>mean score {num(r.summary.meanScore, 3)}</li>
                      <li>
                        p50 {ms(r.summary.latencyMs.p50)} · p95 {ms(r.summary.latencyMs.p95)}
                      </li>
                    </ul>
                  ) : (
                    '—'
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager pager={pager} nextCursor={runs.data?.nextCursor} what="runs" />
      {opened && <RunResults key={opened.id} run={opened} title={label(opened)} />}
      <Compare runs={list} label={label} />
    </>
  );
}

function RunResults({ run, title }: { run: EvalRun; title: string }) {
  const [failingOnly, setFailingOnly] = useState(false);
  const pager = useCursor();
  const results = useLoad(
    () => get<List<EvalResult>>(`/evaluations/runs/${run.id}/results${qs({ limit: 20, cursor: pager.cursor, passed: failingOnly ? 'false' : undefined })}`),
    [run.id, run.progress.done, run.status, failingOnly, pager.cursor],
  );

  const s = run.summary;
  return (
    <section className="panel run-results" aria-label={`Results of ${title} run`}>
      <h4>
        Results of {title} ({run.id})
      </h4>
      {s ? (
        <>
          <dl className="stats">
            <div>
              <dt>Passed</dt>
              <dd data-testid="run-passed">
                {s.passed} of {s.cases} ({pct(s.passRate, 0)})
              </dd>
            </div>
            <div>
              <dt>Mean score</dt>
              <dd>{num(s.meanScore, 3)}</dd>
            </div>
            <div>
              <dt>Errors</dt>
              <dd>{s.errors}</dd>
            </div>
            <div>
              <dt>Latency p50 / p95</dt>
              <dd>
                {ms(s.latencyMs.p50)} / {ms(s.latencyMs.p95)}
              </dd>
            </div>
            <div>
              <dt>Tokens</dt>
              <dd>
                {s.tokens.prompt} prompt · {s.tokens.completion} completion
              </dd>
            </div>
          </dl>
          {s.judge === 'skipped' && <p className="muted">Rubrics were not graded: the configured model is the offline one, which cannot judge.</p>}
          <table>
            <thead>
              <tr>
                <th scope="col">Scorer</th>
                <th scope="col">Cases</th>
                <th scope="col">Mean</th>
                <th scope="col">Passed</th>
              </tr>
            </thead>
            <tbody>
              {s.scorers.map((x) => (
                <tr key={x.scorer}>
                  <th scope="row">{x.scorer}</th>
                  <td>{x.cases}</td>
                  <td>{scoreText(x.scorer, x.mean)}</td>
                  <td>{x.passed === null ? '—' : `${x.passed} of ${x.cases}`}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      ) : (
        <p className="muted">
          {ACTIVE.has(run.status) ? `Running: ${run.progress.done} of ${run.progress.total} cases answered so far.` : 'No summary: the run did not finish.'}
        </p>
      )}
      <label className="check">
        <input
          type="checkbox"
          checked={failingOnly}
          onChange={(e) => {
            setFailingOnly(e.target.checked);
            pager.reset();
          }}
        />{' '}
        Failing cases only
      </label>
      {results.loading && !results.data && <Loading what="results" />}
      <ProblemView error={results.error} />
      {results.data?.data.length === 0 && <Empty>{failingOnly ? 'No failing case.' : 'No case answered yet.'}</Empty>}
      <ol className="plain results-list">
        {results.data?.data.map((r) => (
          <li key={r.caseId}>
            <CaseResult result={r} question={r.input} />
          </li>
        ))}
      </ol>
      <Pager pager={pager} nextCursor={results.data?.nextCursor} what="results" />
    </section>
  );
}

const verdictOf = (passed: boolean | null) => (passed === null ? 'no verdict' : passed ? 'passed' : 'failed');

function CaseResult({ result: r, question }: { result: EvalResult; question: string | null }) {
  return (
    <article className={`case-result ${verdictOf(r.passed).replace(' ', '-')}`} aria-label={`Case ${r.position}`}>
      <h5>
        Case {r.position} · <span className={`status ${r.passed === false ? 'failed' : r.passed ? 'ready' : 'draft'}`}>{verdictOf(r.passed)}</span> · score{' '}
        {num(r.score, 3)}
      </h5>
      {question !== null && (
        <p>
          <strong>Question:</strong> <span className="pre">{question}</span>
        </p>
      )}
      {r.error ? (
        <p className="problem-inline">No answer: {r.error}</p>
      ) : (
        <div>
          <strong>Answer:</strong>
          <p className="answer pre">{r.answer}</p>
        </div>
      )}
      {r.sources.length > 0 && <p>Sources: {r.sources.map((x) => x.sourceName).join('; ')}</p>}
      <table>
        <thead>
          <tr>
            <th scope="col">Scorer</th>
            <th scope="col">Value</th>
            <th scope="col">Result</th>
            <th scope="col">Detail</th>
          </tr>
        </thead>
        <tbody>
          {r.scores.map((x) => (
            <tr key={x.scorer}>
              <th scope="row">{x.scorer}</th>
              <td>{scoreText(x.scorer, x.value)}</td>
              <td>
                <span className={`status ${x.passed === false ? 'failed' : x.passed ? 'ready' : ''}`}>{x.passed === null ? 'measured' : x.passed ? 'pass' : 'fail'}</span>
              </td>
              <td className="pre">{x.detail ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p className="muted">
        {r.latencyMs} ms · {r.tokens.prompt} prompt + {r.tokens.completion} completion tokens
      </p>
    </article>
  );
}

/** Pick two finished runs over this dataset; the comparison case by case. */
function Compare({ runs, label }: { runs: EvalRun[]; label: (r: EvalRun) => string }) {
  const finished = runs.filter((r) => r.summary !== null);
  const [a, setA] = useState('');
  const [b, setB] = useState('');
  const [shown, setShown] = useState<{ a: string; b: string } | null>(null);
  if (finished.length < 2) return <p className="muted">Compare two runs here once two have finished (for example the current version against an earlier one).</p>;
  const name = (r: EvalRun) => `${label(r)} · ${when(r.createdAt)} · mean ${num(r.summary?.meanScore, 3)}`;
  const pick = (text: string, value: string, set: (v: string) => void) => (
    <Field label={text}>
      {(id) => (
        <select id={id} value={value} onChange={(e) => set(e.target.value)} required>
          <option value="">Choose a run</option>
          {finished.map((r) => (
            <option key={r.id} value={r.id}>
              {name(r)}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
  return (
    <form
      className="panel"
      aria-label="Compare two runs"
      onSubmit={(e) => {
        e.preventDefault();
        setShown({ a, b });
      }}
    >
      <h4>Compare two runs</h4>
      <div className="row">
        {pick('Run A (baseline)', a, setA)}
        {pick('Run B', b, setB)}
        <button type="submit" disabled={!a || !b || a === b}>
          Compare
        </button>
      </div>
      {a && a === b && <p className="muted">Pick two different runs.</p>}
      {shown && <ComparisonView a={shown.a} b={shown.b} runs={finished} label={label} />}
    </form>
  );
}

function ComparisonView({ a, b, runs, label }: { a: string; b: string; runs: EvalRun[]; label: (r: EvalRun) => string }) {
  const cmp = useLoad(() => get<Comparison>(`/evaluations/compare${qs({ a, b })}`), [a, b]);
  if (cmp.loading && !cmp.data) return <Loading what="the comparison" />;
  if (cmp.error || !cmp.data) return <ProblemView error={cmp.error} />;
  const c = cmp.data;
  const nameOf = (side: RunSide) => {
    const r = runs.find((x) => x.id === side.runId);
    return r ? label(r) : `${side.personaId}@${side.personaVersion}`;
  };
  const interval = c.bootstrap.interval;
  return (
    <div className="comparison" data-testid="comparison">
      <table>
        <thead>
          <tr>
            <th scope="col">Side</th>
            <th scope="col">Run</th>
            <th scope="col">Mean score</th>
            <th scope="col">Pass rate</th>
          </tr>
        </thead>
        <tbody>
          {(['a', 'b'] as const).map((k) => (
            <tr key={k}>
              <th scope="row">{k.toUpperCase()}</th>
              <td>
                {nameOf(c[k])} <span className="muted">({c[k].runId})</span>
              </td>
              <td>{num(c[k].meanScore, 3)}</td>
              <td>{pct(c[k].passRate, 0)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p className="verdict" data-testid="compare-winner">
        {c.winner ? `Winner: ${c.winner} (${nameOf(c.winner === 'A' ? c.a : c.b)})` : 'No clear winner'}
      </p>
      <p data-testid="compare-verdict">{c.verdict}</p>
      <dl className="facts">
        <dt>Mean difference B − A</dt>
        <dd>
          {signed(c.meanDifference)} over {c.pairs} {c.pairs === 1 ? 'case' : 'cases'} both runs scored
        </dd>
        <dt>95 % paired-bootstrap interval</dt>
        <dd>{interval ? `${signed(interval[0])} to ${signed(interval[1])} (${interval[0] > 0 || interval[1] < 0 ? 'excludes' : 'includes'} 0)` : 'not enough cases'}</dd>
        <dt>Sign test</dt>
        <dd>
          B better in {c.signTest.wins}, worse in {c.signTest.losses}, tied in {c.signTest.ties}; p = {c.signTest.pValue === null ? '—' : c.signTest.pValue.toPrecision(3)}
        </dd>
      </dl>
      <p className="muted">A winner is named only when both agree: the interval excludes 0 and the sign test's p &lt; 0.05.</p>
      <h5>Changed cases</h5>
      {c.changed.length === 0 ? (
        <Empty>No case scored differently.</Empty>
      ) : (
        <table data-testid="changed-cases">
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Question</th>
              <th scope="col">A</th>
              <th scope="col">B</th>
              <th scope="col">Change</th>
            </tr>
          </thead>
          <tbody>
            {c.changed.map((x) => (
              <tr key={x.caseId}>
                <th scope="row">{x.position}</th>
                <td className="pre">{x.input}</td>
                <td>{num(x.a, 3)}</td>
                <td>{num(x.b, 3)}</td>
                <td className={x.a !== null && x.b !== null && x.b < x.a ? 'worse' : 'better'}>
                  {x.a !== null && x.b !== null ? (x.b > x.a ? `better ${signed(x.b - x.a)}` : `worse ${signed(x.b - x.a)}`) : x.b === null ? 'B has no score' : 'A has no score'}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
