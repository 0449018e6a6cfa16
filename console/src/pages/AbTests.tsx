import { type FormEvent, lazy, Suspense, useEffect, useId, useMemo, useState } from 'react';
import { api, get, type List, parsePersonaRef, type Persona } from '../api';
import { Empty, Field, Loading, num, PersonaSelect, pct, ProblemView, refLabel, ScopedButton, useAction, useLoad, VersionSelect, when } from '../ui';

const BandChart = lazy(() => import('./Chart').then((m) => ({ default: m.BandChart })));

interface Guardrails {
  maxErrorRate?: number;
  maxP95LatencyMs?: number;
  minSatisfaction?: number;
}
interface AbTest {
  id: string;
  name: string;
  /** `per_…` (its current version) or `per_…@n` (version n). */
  personaA: string;
  personaB: string;
  trafficSplit: number;
  status: 'draft' | 'running' | 'completed';
  guardrails: Guardrails;
  stopReason: string | null;
  promoted: 'A' | 'B' | null;
  promotedAt: string | null;
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
type Interval = [number, number];
interface Sequential {
  method: 'msprt';
  alpha: number;
  tau: number;
  difference: number | null;
  pValue: number | null;
  interval: Interval | null;
  significant: boolean;
  winner: 'A' | 'B' | null;
  series: { at: string; ratings: number; pValue: number | null; interval: Interval | null }[];
}
interface GuardrailStatus {
  guardrail: keyof Guardrails;
  limit: number;
  observed: number | null;
  interval: Interval | null;
  breached: boolean;
}
interface Results {
  testId: string;
  status: string;
  variants: { A: Variant; B: Variant };
  significance: { metric: string; pValue: number | null; significant: boolean; winner: 'A' | 'B' | null };
  sequential: Sequential;
  guardrails: GuardrailStatus[];
}

const MIN_FOR_P = 2;
/** A p-value to four places; below that, "< 0.0001". */
const pText = (p: number) => (p < 0.0001 ? '< 0.0001' : p.toFixed(4));
/** "= 0.0123" or "< 0.0001", after "p". */
const pIs = (p: number) => (p < 0.0001 ? '< 0.0001' : `= ${p.toFixed(4)}`);
const ciOf = (s: Variant['satisfaction']): [number, number] | null => (s.ci95[0] !== null && s.ci95[1] !== null ? [s.ci95[0], s.ci95[1]] : null);
const MIN_FOR_WINNER = 10;

/** The API's winner rule (API.md §8), in words, for these results. */
export function verdict(r: Results): string {
  const { A, B } = r.variants;
  const { pValue, significant, winner } = r.significance;
  if (winner) return `Variant ${winner} wins: its average rating is higher and the difference is significant (p ${pIs(pValue!)} < 0.05) with at least ${MIN_FOR_WINNER} ratings each.`;
  const short = (need: number) =>
    (['A', 'B'] as const)
      .filter((v) => r.variants[v].satisfaction.count < need)
      .map((v) => `${r.variants[v].satisfaction.count} of ${need} for ${v}`)
      .join(', ');
  if (pValue === null) return `Not enough ratings yet: ${short(MIN_FOR_P)} (a p-value needs ${MIN_FOR_P} ratings per variant).`;
  if (!significant) return `No winner: the difference is not significant (p = ${pValue.toFixed(4)} ≥ 0.05). A ${A.satisfaction.count} and B ${B.satisfaction.count} ratings so far.`;
  return `Significant (p ${pIs(pValue)}) but not enough ratings yet: ${short(MIN_FOR_WINNER)}.`;
}

export function AbTestsPage() {
  const tests = useLoad(() => get<List<AbTest>>('/business/ab-tests?limit=100'), []);
  const personas = useLoad(() => get<List<Persona>>('/personas?limit=100'), []);
  const [open, setOpen] = useState<string | null>(null);
  const act = useAction();
  const nameOf = (ref: string) => refLabel(ref, personas.data?.data);
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
            {Object.keys(t.guardrails).length > 0 && <p>Guardrails for B: {guardrailList(t.guardrails)}</p>}
            {t.stopReason && <p data-testid="stop-reason">Stopped: {t.stopReason === 'manual' ? 'by hand' : t.stopReason}</p>}
            {t.promoted && (
              <p>
                <strong>Promoted variant {t.promoted}</strong> ({nameOf(t.promoted === 'A' ? t.personaA : t.personaB)}) on {when(t.promotedAt)}: new conversations through this test go to
                it.
              </p>
            )}
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
            {open === t.id && <ResultsView test={t} nameOf={nameOf} onChanged={tests.reload} />}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** The guardrails a test keeps, in words. */
function guardrailList(g: Guardrails): string {
  const parts: string[] = [];
  if (g.maxErrorRate !== undefined) parts.push(`error rate at most ${pct(g.maxErrorRate)}`);
  if (g.maxP95LatencyMs !== undefined) parts.push(`p95 answer time at most ${g.maxP95LatencyMs} ms`);
  if (g.minSatisfaction !== undefined) parts.push(`average rating at least ${g.minSatisfaction}`);
  return parts.join(' · ');
}

function CreateTest({ personas, onCreated }: { personas: Persona[]; onCreated: () => void }) {
  const [name, setName] = useState('');
  const [a, setA] = useState('');
  const [b, setB] = useState('');
  const [versionA, setVersionA] = useState('');
  const [versionB, setVersionB] = useState('');
  const [split, setSplit] = useState('50');
  const [maxErrorRate, setMaxErrorRate] = useState('');
  const [maxP95, setMaxP95] = useState('');
  const [minSatisfaction, setMinSatisfaction] = useState('');
  const act = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      const guardrails: Guardrails = {};
      if (maxErrorRate !== '') guardrails.maxErrorRate = Number(maxErrorRate) / 100;
      if (maxP95 !== '') guardrails.maxP95LatencyMs = Number(maxP95);
      if (minSatisfaction !== '') guardrails.minSatisfaction = Number(minSatisfaction);
      const ref = (persona: string, version: string) => (version ? `${persona}@${version}` : persona);
      await api('POST', '/business/ab-tests', { name, personaA: ref(a, versionA), personaB: ref(b, versionB), trafficSplit: Number(split) / 100, guardrails });
      setName('');
      onCreated();
    });
  };
  const pick = (v: 'A' | 'B', value: string, set: (v: string) => void, version: string, setVersion: (v: string) => void) => (
    <div className="pair">
      <PersonaSelect
        label={`Persona ${v}`}
        personas={personas}
        value={value}
        onChange={(id) => {
          set(id);
          setVersion('');
        }}
        none="Choose a persona"
        required
      />
      <VersionSelect label={`Version ${v}`} personaId={value} value={version} onChange={setVersion} current="Current version, following edits" />
    </div>
  );
  return (
    <form className="panel" onSubmit={submit} aria-label="New A/B test">
      <h2>New A/B test</h2>
      {personas.length === 0 && <p className="empty">An A/B test compares two personas, or two versions of one — create a persona on the Personas page first.</p>}
      <Field label="Test name">{(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} required />}</Field>
      {pick('A', a, setA, versionA, setVersionA)}
      {pick('B', b, setB, versionB, setVersionB)}
      <p className="muted">A and B may be two versions of the same persona: pick the persona twice with a version each.</p>
      <Field label="Traffic to A (%)">{(id) => <input id={id} type="number" min={0} max={100} value={split} onChange={(e) => setSplit(e.target.value)} required />}</Field>
      <fieldset>
        <legend>Guardrails for B (optional)</legend>
        <p className="muted">The test stops itself when B breaks one with sequential evidence (its 95 % confidence sequence wholly beyond the limit).</p>
        <div className="row">
          <Field label="Max error rate (%)">
            {(id) => <input id={id} type="number" min={0} max={100} step="any" value={maxErrorRate} onChange={(e) => setMaxErrorRate(e.target.value)} />}
          </Field>
          <Field label="Max p95 answer time (ms)">
            {(id) => <input id={id} type="number" min={1} max={600000} step={1} value={maxP95} onChange={(e) => setMaxP95(e.target.value)} />}
          </Field>
          <Field label="Min average rating (1–5)">
            {(id) => <input id={id} type="number" min={1} max={5} step="any" value={minSatisfaction} onChange={(e) => setMinSatisfaction(e.target.value)} />}
          </Field>
        </div>
      </fieldset>
      <ProblemView error={act.error} />
      <ScopedButton scope="write" type="submit" disabled={act.busy}>
        Create test
      </ScopedButton>
    </form>
  );
}

function ResultsView({ test, nameOf, onChanged }: { test: AbTest; nameOf: (ref: string) => string; onChanged: () => void }) {
  const r = useLoad(() => get<Results>(`/business/ab-tests/${test.id}/results`), [test.id, test.status, test.promoted]);
  // Reading the results of a test whose B broke a guardrail stops it: show the test as it is now.
  const stoppedMeanwhile = r.data !== undefined && r.data.status !== test.status;
  useEffect(() => {
    if (stoppedMeanwhile) onChanged();
  }, [stoppedMeanwhile, onChanged]);
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
      <h4>Is the difference real?</h4>
      <TwoTests results={data} />
      <p className="verdict">
        Welch's t-test: <span data-testid="verdict">{verdict(data)}</span>
      </p>
      <p className="verdict">
        Sequential test: <span data-testid="sequential-verdict">{sequentialVerdict(data)}</span>
      </p>
      <p className="muted">
        Welch's p-value holds only when read once, after a number of ratings fixed in advance; looking every day and stopping at the first p &lt; 0.05 finds
        differences that are not there. The sequential p-value and interval stay valid however often you look.
      </p>
      <SequenceChart sequential={data.sequential} />
      <GuardrailsView test={test} guardrails={data.guardrails} />
      <Promote test={test} results={data} nameOf={nameOf} onChanged={onChanged} />
    </div>
  );
}

const CONFIDENCE = (alpha: number) => `${Math.round((1 - alpha) * 100)} %`;
const signed = (v: number) => (v > 0 ? `+${v.toFixed(2)}` : v.toFixed(2));
const range = (i: Interval | null) => (i ? `${signed(i[0])} to ${signed(i[1])}` : '—');

/** Welch's t-test and the sequential test side by side. */
function TwoTests({ results }: { results: Results }) {
  const w = results.significance;
  const s = results.sequential;
  const pOf = (p: number | null) => (p === null ? 'not yet' : pText(p));
  return (
    <table className="compare-tests">
      <thead>
        <tr>
          <th scope="col">
            <span className="visually-hidden">Figure</span>
          </th>
          <th scope="col">Welch's t-test</th>
          <th scope="col">Sequential (mSPRT)</th>
        </tr>
      </thead>
      <tbody>
        <tr>
          <th scope="row">p-value</th>
          <td>{pOf(w.pValue)}</td>
          <td data-testid="sequential-p">{pOf(s.pValue)}</td>
        </tr>
        <tr>
          <th scope="row">B − A (average rating)</th>
          <td>
            {results.variants.A.satisfaction.average !== null && results.variants.B.satisfaction.average !== null
              ? signed(results.variants.B.satisfaction.average - results.variants.A.satisfaction.average)
              : '—'}
          </td>
          <td>{s.difference === null ? '—' : signed(s.difference)}</td>
        </tr>
        <tr>
          <th scope="row">Interval for B − A</th>
          <td>—</td>
          <td data-testid="sequential-interval">
            {range(s.interval)}
            {s.interval ? ` (${CONFIDENCE(s.alpha)} confidence sequence)` : ''}
          </td>
        </tr>
        <tr>
          <th scope="row">Winner</th>
          <td>{w.winner ?? 'none'}</td>
          <td>{s.winner ?? 'none'}</td>
        </tr>
        <tr>
          <th scope="row">When to read</th>
          <td>Once, at a horizon fixed in advance</td>
          <td>Safe to read at any time</td>
        </tr>
      </tbody>
    </table>
  );
}

/** The sequential test in words. */
export function sequentialVerdict(r: Results): string {
  const s = r.sequential;
  const level = CONFIDENCE(s.alpha);
  if (s.interval === null || s.pValue === null) {
    const counts = (['A', 'B'] as const).map((v) => `${v} ${r.variants[v].satisfaction.count}`).join(', ');
    return `Not enough ratings yet: the sequential test needs ${MIN_FOR_WINNER} per variant (${counts}). Safe to read at any time.`;
  }
  if (s.winner) {
    return `Variant ${s.winner} wins: B − A lies between ${signed(s.interval[0])} and ${signed(s.interval[1])} (${level} confidence sequence, which excludes 0; p ${pIs(s.pValue)}). Safe to read at any time.`;
  }
  return `No winner yet: B − A lies between ${signed(s.interval[0])} and ${signed(s.interval[1])} (${level} confidence sequence, which includes 0; p ${pIs(s.pValue)}). Safe to read at any time — more ratings narrow it.`;
}

/** The confidence sequence for B − A as it stood after each day with ratings. */
function SequenceChart({ sequential }: { sequential: Sequential }) {
  const points = useMemo(
    () => sequential.series.filter((p) => p.interval !== null).map((p) => ({ at: p.at, lower: p.interval![0], upper: p.interval![1] })),
    [sequential.series],
  );
  if (points.length === 0) return <p className="empty">The interval over time appears once each variant has {MIN_FOR_WINNER} ratings.</p>;
  const last = points[points.length - 1]!;
  const description = `${points.length} ${points.length === 1 ? 'day' : 'days'} with ratings; latest ${CONFIDENCE(sequential.alpha)} interval for B − A ${signed(last.lower)} to ${signed(last.upper)}, ${last.lower > 0 || last.upper < 0 ? 'excluding' : 'including'} 0`;
  return (
    <Suspense fallback={<Loading what="the interval chart" />}>
      <BandChart title="B − A over time (sequential interval, 0 line dashed)" unit="rating" points={points} description={description} />
    </Suspense>
  );
}

const GUARDRAIL_WORDS: Record<GuardrailStatus['guardrail'], { name: string; limit: (v: number) => string; observed: (v: number) => string }> = {
  maxErrorRate: { name: 'Error rate of B', limit: (v) => `at most ${pct(v)}`, observed: (v) => pct(v) },
  maxP95LatencyMs: {
    name: 'p95 answer time of B',
    limit: (v) => `at most ${v} ms`,
    observed: (v) => `${pct(v)} of answers slower than the limit (5 % allowed)`,
  },
  minSatisfaction: { name: 'Average rating of B', limit: (v) => `at least ${v}`, observed: (v) => num(v) },
};

function GuardrailsView({ test, guardrails }: { test: AbTest; guardrails: GuardrailStatus[] }) {
  if (guardrails.length === 0) return <p className="muted">No guardrails: this test stops only by hand.</p>;
  return (
    <>
      <h4>Guardrails</h4>
      <table>
        <thead>
          <tr>
            <th scope="col">Guardrail</th>
            <th scope="col">Limit</th>
            <th scope="col">Observed</th>
            <th scope="col">95 % interval</th>
            <th scope="col">Status</th>
          </tr>
        </thead>
        <tbody>
          {guardrails.map((g) => {
            const words = GUARDRAIL_WORDS[g.guardrail];
            // Shares (error rate, slow answers) shown within 0–100 %; ratings within 1–5.
            const show = g.guardrail === 'minSatisfaction' ? (v: number) => Math.min(5, Math.max(1, v)).toFixed(2) : (v: number) => pct(Math.min(1, Math.max(0, v)));
            return (
              <tr key={g.guardrail}>
                <th scope="row">{words.name}</th>
                <td>{words.limit(g.limit)}</td>
                <td>{g.observed === null ? 'no data yet' : words.observed(g.observed)}</td>
                <td>{g.interval ? `${show(g.interval[0])} – ${show(g.interval[1])}` : '—'}</td>
                <td>
                  <span className={`status ${g.breached ? 'failed' : g.observed === null ? 'draft' : 'ready'}`} data-testid={`guardrail-${g.guardrail}`}>
                    {g.breached ? 'broken' : g.observed === null ? 'waiting for data' : 'holding'}
                  </span>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {test.stopReason && test.stopReason !== 'manual' && <p className="problem-inline">The test stopped itself: {test.stopReason}.</p>}
    </>
  );
}

/** Makes the winner current once the test is completed; without a sequential winner, a variant chosen by hand. */
function Promote({ test, results, nameOf, onChanged }: { test: AbTest; results: Results; nameOf: (ref: string) => string; onChanged: () => void }) {
  const [chosen, setChosen] = useState<'A' | 'B' | ''>('');
  const act = useAction();
  const reasonId = useId();
  if (test.promoted) return null;
  const winner = results.sequential.winner;
  const completed = test.status === 'completed';
  const variant = winner ?? (chosen || null);
  const promote = () =>
    act.run(async () => {
      if (!variant) return;
      const ref = variant === 'A' ? test.personaA : test.personaB;
      const { personaId, version } = parsePersonaRef(ref);
      const restore = version === null ? '' : ` Version ${version} becomes the current version of ${nameOf(personaId)}.`;
      if (!confirm(`Promote variant ${variant} (${nameOf(ref)})? New conversations through “${test.name}” go to it, and channels routed through the test move to it.${restore}`)) return;
      await api('POST', `/business/ab-tests/${test.id}/promote`, winner ? {} : { variant });
      onChanged();
    });
  return (
    <div className="panel promote">
      <h4>Promote</h4>
      {completed && winner && <p>Variant {winner} won with sequential evidence.</p>}
      {completed && !winner && (
        <fieldset>
          <legend>No variant won with sequential evidence: choose the one to promote</legend>
          {(['A', 'B'] as const).map((v) => (
            <label key={v} className="check">
              <input type="radio" name={`promote-${test.id}`} value={v} checked={chosen === v} onChange={() => setChosen(v)} /> Variant {v} ({nameOf(v === 'A' ? test.personaA : test.personaB)})
            </label>
          ))}
        </fieldset>
      )}
      <div className="row">
        <ScopedButton scope="write" onClick={() => void promote()} disabled={!completed || !variant || act.busy} aria-describedby={completed ? undefined : reasonId}>
          Promote winner
        </ScopedButton>
        {!completed && (
          <small id={reasonId} className="reason">
            Stop the test first: only a completed test can be promoted.
          </small>
        )}
      </div>
      <ProblemView error={act.error} />
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
