import { type FormEvent, useState } from 'react';
import { api, get, type List, type Persona } from '../api';
import { Empty, Field, Loading, PersonaSelect, ProblemView, ScopedButton, useAction, useLoad, when } from '../ui';

interface AbTest {
  id: string;
  name: string;
  personaA: string;
  personaB: string;
  trafficSplit: number;
  status: 'draft' | 'running' | 'completed';
  createdAt: string;
  startedAt: string | null;
  endedAt: string | null;
}
interface Variant {
  personaId: string;
  conversations: number;
  messages: number;
  satisfaction: { average: number | null; count: number; ci95: [number | null, number | null] };
  responseTime: { avgMs: number | null; p50Ms: number | null };
}
interface Results {
  testId: string;
  status: string;
  variants: { A: Variant; B: Variant };
  significance: { metric: string; pValue: number | null; significant: boolean; winner: 'A' | 'B' | null };
}

const MIN_FOR_P = 2;
const ciOf = (s: Variant['satisfaction']): [number, number] | null => (s.ci95[0] !== null && s.ci95[1] !== null ? [s.ci95[0], s.ci95[1]] : null);
const MIN_FOR_WINNER = 10;

/** The API's winner rule (API.md §8), in words, for these results. */
export function verdict(r: Results): string {
  const { A, B } = r.variants;
  const { pValue, significant, winner } = r.significance;
  if (winner) return `Variant ${winner} wins: its average rating is higher and the difference is significant (p = ${pValue!.toFixed(4)} < 0.05) with at least ${MIN_FOR_WINNER} ratings each.`;
  const short = (need: number) =>
    (['A', 'B'] as const)
      .filter((v) => r.variants[v].satisfaction.count < need)
      .map((v) => `${r.variants[v].satisfaction.count} of ${need} for ${v}`)
      .join(', ');
  if (pValue === null) return `Not enough ratings yet: ${short(MIN_FOR_P)} (a p-value needs ${MIN_FOR_P} ratings per variant).`;
  if (!significant) return `No winner: the difference is not significant (p = ${pValue.toFixed(4)} ≥ 0.05). A ${A.satisfaction.count} and B ${B.satisfaction.count} ratings so far.`;
  return `Significant (p = ${pValue.toFixed(4)}) but not enough ratings yet: ${short(MIN_FOR_WINNER)}.`;
}

export function AbTestsPage() {
  const tests = useLoad(() => get<List<AbTest>>('/business/ab-tests?limit=100'), []);
  const personas = useLoad(() => get<List<Persona>>('/personas?limit=100'), []);
  const [open, setOpen] = useState<string | null>(null);
  const act = useAction();
  const nameOf = (id: string) => personas.data?.data.find((p) => p.id === id)?.name ?? id;
  const change = (t: AbTest, to: 'start' | 'stop') =>
    act.run(async () => {
      await api('PUT', `/business/ab-tests/${t.id}/${to}`);
      tests.reload();
    });
  return (
    <section>
      <CreateTest personas={personas.data?.data ?? []} onCreated={tests.reload} />
      <ProblemView error={act.error} />
      <h2>Tests</h2>
      {tests.loading && !tests.data && <Loading what="A/B tests" />}
      <ProblemView error={tests.error} />
      {tests.data?.data.length === 0 && <Empty>No A/B tests yet — create one above from two personas.</Empty>}
      <ul className="cards">
        {tests.data?.data.map((t) => (
          <li key={t.id} className={open === t.id ? "card wide" : "card"}>
            <h3>{t.name}</h3>
            <p>
              <span className={`status ${t.status}`}>{t.status}</span> · A: {nameOf(t.personaA)} ({Math.round(t.trafficSplit * 100)} %) · B: {nameOf(t.personaB)} (
              {Math.round((1 - t.trafficSplit) * 100)} %)
            </p>
            <p className="muted">
              {t.id} · created {when(t.createdAt)}
              {t.startedAt ? ` · started ${when(t.startedAt)}` : ''}
              {t.endedAt ? ` · ended ${when(t.endedAt)}` : ''}
            </p>
            <div className="row">
              {t.status === 'draft' && (
                <ScopedButton scope="write" onClick={() => void change(t, 'start')} aria-label={`Start ${t.name}`}>
                  Start
                </ScopedButton>
              )}
              {t.status === 'running' && (
                <ScopedButton scope="write" className="danger" onClick={() => void change(t, 'stop')} aria-label={`Stop ${t.name}`}>
                  Stop
                </ScopedButton>
              )}
              <button className="secondary" onClick={() => setOpen(open === t.id ? null : t.id)} aria-expanded={open === t.id} aria-label={`Results of ${t.name}`}>
                Results
              </button>
            </div>
            {open === t.id && <ResultsView test={t} nameOf={nameOf} />}
          </li>
        ))}
      </ul>
    </section>
  );
}

function CreateTest({ personas, onCreated }: { personas: Persona[]; onCreated: () => void }) {
  const [name, setName] = useState('');
  const [a, setA] = useState('');
  const [b, setB] = useState('');
  const [split, setSplit] = useState('50');
  const act = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      await api('POST', '/business/ab-tests', { name, personaA: a, personaB: b, trafficSplit: Number(split) / 100 });
      setName('');
      onCreated();
    });
  };
  const pick = (label: string, value: string, set: (v: string) => void) => (
    <PersonaSelect label={label} personas={personas} value={value} onChange={set} none="Choose a persona" required />
  );
  return (
    <form className="panel" onSubmit={submit} aria-label="New A/B test">
      <h2>New A/B test</h2>
      {personas.length < 2 && <p className="empty">An A/B test compares two personas — create at least two on the Personas page.</p>}
      <Field label="Test name">{(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} required />}</Field>
      {pick('Persona A', a, setA)}
      {pick('Persona B', b, setB)}
      <Field label="Traffic to A (%)">{(id) => <input id={id} type="number" min={0} max={100} value={split} onChange={(e) => setSplit(e.target.value)} required />}</Field>
      <ProblemView error={act.error} />
      <ScopedButton scope="write" type="submit" disabled={act.busy}>
        Create test
      </ScopedButton>
    </form>
  );
}

function ResultsView({ test, nameOf }: { test: AbTest; nameOf: (id: string) => string }) {
  const r = useLoad(() => get<Results>(`/business/ab-tests/${test.id}/results`), [test.id, test.status]);
  if (r.loading && !r.data) return <Loading what="results" />;
  if (r.error) return <ProblemView error={r.error} />;
  const data = r.data!;
  return (
    <div className="results" aria-label={`Results of ${test.name}`}>
      <table>
        <thead>
          <tr>
            <th scope="col">Variant</th>
            <th scope="col">Persona</th>
            <th scope="col">Conversations</th>
            <th scope="col">Answers</th>
            <th scope="col">Ratings</th>
            <th scope="col">Average (95 % CI)</th>
            <th scope="col">Response p50</th>
          </tr>
        </thead>
        <tbody>
          {(['A', 'B'] as const).map((v) => {
            const x = data.variants[v];
            const ci = ciOf(x.satisfaction);
            return (
              <tr key={v}>
                <th scope="row">{v}</th>
                <td>{nameOf(x.personaId)}</td>
                <td>{x.conversations}</td>
                <td>{x.messages}</td>
                <td>{x.satisfaction.count}</td>
                <td>
                  {x.satisfaction.average === null ? '—' : x.satisfaction.average.toFixed(2)}
                  {ci ? ` (${ci[0].toFixed(2)}–${ci[1].toFixed(2)})` : ''}
                </td>
                <td>{x.responseTime.p50Ms === null ? '—' : `${Math.round(x.responseTime.p50Ms)} ms`}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <Intervals results={data} />
      <p>
        p-value: <strong>{data.significance.pValue === null ? 'not yet' : data.significance.pValue.toFixed(4)}</strong> (Welch's t-test on the 1–5 ratings)
      </p>
      <p className="verdict" data-testid="verdict">
        {verdict(data)}
      </p>
    </div>
  );
}

/** Each variant's average rating with its 95 % interval, on the 1–5 scale. */
function Intervals({ results }: { results: Results }) {
  const W = 360;
  const x = (v: number) => 40 + ((Math.min(5, Math.max(1, v)) - 1) / 4) * (W - 60);
  const desc = (['A', 'B'] as const)
    .map((v) => {
      const s = results.variants[v].satisfaction;
      const ci = ciOf(s);
      return s.average === null ? `${v}: no ratings` : `${v}: ${s.average.toFixed(2)}${ci ? ` (95 % CI ${ci[0].toFixed(2)} to ${ci[1].toFixed(2)})` : ''}`;
    })
    .join('; ');
  return (
    <svg className="intervals" viewBox={`0 0 ${W} 90`} role="img" aria-label={`Average rating with 95 % intervals — ${desc}`}>
      {[1, 2, 3, 4, 5].map((t) => (
        <g key={t}>
          <line x1={x(t)} x2={x(t)} y1={10} y2={70} className="grid" />
          <text x={x(t)} y={85} textAnchor="middle">
            {t}
          </text>
        </g>
      ))}
      {(['A', 'B'] as const).map((v, i) => {
        const s = results.variants[v].satisfaction;
        const ci = ciOf(s);
        const y = 25 + i * 30;
        return (
          <g key={v}>
            <text x={10} y={y + 4}>
              {v}
            </text>
            {ci && <line x1={x(ci[0])} x2={x(ci[1])} y1={y} y2={y} className={`ci v${v}`} />}
            {ci && <line x1={x(ci[0])} x2={x(ci[0])} y1={y - 6} y2={y + 6} className={`ci v${v}`} />}
            {ci && <line x1={x(ci[1])} x2={x(ci[1])} y1={y - 6} y2={y + 6} className={`ci v${v}`} />}
            {s.average !== null && <circle cx={x(s.average)} cy={y} r={5} className={`dot v${v}`} />}
          </g>
        );
      })}
    </svg>
  );
}
