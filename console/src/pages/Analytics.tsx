import { lazy, Suspense, useState } from 'react';
import { type Channel, get, type List, type Persona, qs, request } from '../api';
import { download, Field, Loading, PersonaSelect, ProblemView, ScopedButton, useAction, useLoad } from '../ui';

const Chart = lazy(() => import('./Chart'));

type Series = { start: string; value: number | null }[];
interface Overview {
  timeframe: string;
  from: string;
  to: string;
  metrics: {
    conversations: { total: number; series: Series };
    satisfaction: { average: number | null; count: number; series: Series };
    response_time: { avgMs: number | null; p50Ms: number | null; p95Ms: number | null; series: Series };
  };
}
interface Performance {
  latency: { p50Ms: number | null; p95Ms: number | null; p99Ms: number | null };
  firstTokenMs: { p50Ms: number | null; p95Ms: number | null };
  tokens: { prompt: number; completion: number };
  errors: { count: number; rate: number };
  tools: { calls: number; failures: number };
}
/** The export datasets (API.md §8) and what a row of each is. */
const EXPORTS = [
  ['metrics', 'the series, one row per bucket'],
  ['conversations', 'one row per session'],
  ['messages', 'the text: one row per question and answer'],
  ['answers', 'one row per answer: its figures, no text'],
] as const;

const ms = (v: number | null | undefined) => (v === null || v === undefined ? '—' : `${Math.round(v)} ms`);

export function AnalyticsPage() {
  const [timeframe, setTimeframe] = useState('7d');
  const [personaId, setPersonaId] = useState('');
  const [channelId, setChannelId] = useState('');
  const personas = useLoad(() => get<List<Persona>>('/personas?limit=100'), []);
  const channels = useLoad(() => get<List<Channel>>('/business/channels?limit=100'), []);
  const filter = qs({ timeframe, personaId, channelId });
  const overview = useLoad(() => get<Overview>(`/business/analytics${filter}`), [filter]);
  const perf = useLoad(() => get<Performance>(`/business/analytics/performance${filter}`), [filter]);
  const exp = useAction();

  const exportAs = (dataset: string, format: string) =>
    exp.run(async () => {
      const res = await request('POST', '/business/analytics/export', { timeframe, dataset, format });
      download(await res.blob(), `switchboard-${dataset}-${timeframe}.${format}`);
    });

  const m = overview.data?.metrics;
  return (
    <section>
      <div className="toolbar">
        <Field label="Timeframe">
          {(id) => (
            <select id={id} value={timeframe} onChange={(e) => setTimeframe(e.target.value)}>
              <option value="24h">Last 24 hours</option>
              <option value="7d">Last 7 days</option>
              <option value="30d">Last 30 days</option>
              <option value="90d">Last 90 days</option>
            </select>
          )}
        </Field>
        <PersonaSelect label="Persona filter" personas={personas.data?.data} value={personaId} onChange={setPersonaId} none="All personas" />
        <Field label="Channel filter">
          {(id) => (
            <select id={id} value={channelId} onChange={(e) => setChannelId(e.target.value)}>
              <option value="">All channels</option>
              {channels.data?.data.map((c) => (
                <option key={c.id} value={c.id}>
                  {c.name}
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      {overview.loading && !overview.data && <Loading what="analytics" />}
      <ProblemView error={overview.error} />
      {m && (
        <>
          <dl className="stats">
            <div>
              <dt>Conversations</dt>
              <dd data-testid="conversations-total">{m.conversations.total}</dd>
            </div>
            <div>
              <dt>Satisfaction</dt>
              <dd data-testid="satisfaction">
                {m.satisfaction.average === null ? 'no ratings yet' : `${m.satisfaction.average.toFixed(2)} / 5`} ({m.satisfaction.count}{' '}
                {m.satisfaction.count === 1 ? 'rating' : 'ratings'})
              </dd>
            </div>
            <div>
              <dt>Response time</dt>
              <dd>
                avg {ms(m.response_time.avgMs)} · p50 {ms(m.response_time.p50Ms)} · p95 {ms(m.response_time.p95Ms)}
              </dd>
            </div>
          </dl>
          {m.conversations.total === 0 && <p className="empty">No conversations in this timeframe — ask a persona in the Playground and come back.</p>}
          <Suspense fallback={<Loading what="charts" />}>
            <div className="charts">
              <Chart title="Conversations" unit="sessions" series={m.conversations.series} />
              <Chart title="Satisfaction (average rating)" unit="1–5" series={m.satisfaction.series} />
              <Chart title="Response time (average)" unit="ms" series={m.response_time.series} />
            </div>
          </Suspense>
        </>
      )}
      <h2>Performance</h2>
      <ProblemView error={perf.error} />
      {perf.data && (
        <table>
          <tbody>
            <tr>
              <th scope="row">Latency</th>
              <td>
                p50 {ms(perf.data.latency.p50Ms)} · p95 {ms(perf.data.latency.p95Ms)} · p99 {ms(perf.data.latency.p99Ms)}
              </td>
            </tr>
            <tr>
              <th scope="row">First token</th>
              <td>
                p50 {ms(perf.data.firstTokenMs.p50Ms)} · p95 {ms(perf.data.firstTokenMs.p95Ms)}
              </td>
            </tr>
            <tr>
              <th scope="row">Tokens</th>
              <td>
                {perf.data.tokens.prompt} prompt · {perf.data.tokens.completion} completion
              </td>
            </tr>
            <tr>
              <th scope="row">Errors</th>
              <td>
                {perf.data.errors.count} ({(perf.data.errors.rate * 100).toFixed(1)} %)
              </td>
            </tr>
            <tr>
              <th scope="row">Tool calls</th>
              <td>
                {perf.data.tools.calls} ({perf.data.tools.failures} failed)
              </td>
            </tr>
          </tbody>
        </table>
      )}
      <h2>Export</h2>
      <p>Download this timeframe's data (all personas and channels).</p>
      {EXPORTS.map(([dataset, what]) => (
        <div className="row" key={dataset}>
          <span className="label-like">{dataset}:</span>
          {(['csv', 'json', 'ndjson'] as const).map((format) => (
            <ScopedButton key={format} scope="read" className="secondary" onClick={() => void exportAs(dataset, format)} aria-label={`Export ${dataset} as ${format.toUpperCase()}`}>
              {format.toUpperCase()}
            </ScopedButton>
          ))}
          <span className="muted">{what}</span>
        </div>
      ))}
      <ProblemView error={exp.error} />
    </section>
  );
}
