import { type FormEvent, useState } from 'react';
import { api, ApiError, type ApiKey, get, type List, type Persona, type PersonaVersion, qs, type Team } from '../api';
import { useAuth } from '../auth';
import { type DiffLine, lineDiff } from '../diff';
import { Empty, Field, type Loaded, Loading, ms, Pager, pct, ProblemView, ScopedButton, useAction, useCursor, useLoad, when } from '../ui';

const splitList = (s: string) =>
  s
    .split(/[\n,]/)
    .map((x) => x.trim())
    .filter(Boolean);
/** One item a line (keywords may hold commas). */
const lines = (s: string) =>
  s
    .split('\n')
    .map((x) => x.trim())
    .filter(Boolean);

/** When a persona hands over, in one line: "Human handoff to Support: /human, keywords refund, chargeback, a low rating". */
function handoffLine(p: Persona, teams: Team[] | undefined): string | null {
  if (!p.teamId) return null;
  const team = teams?.find((t) => t.id === p.teamId)?.name ?? p.teamId;
  const ways = ['/human'];
  if (p.handoff.keywords.length) ways.push(`keywords ${p.handoff.keywords.join(', ')}`);
  if (p.handoff.lowRating) ways.push('a low rating');
  if (p.handoff.tool) ways.push('the handoff tool');
  return `Human handoff to ${team}: ${ways.join('; ')}`;
}

export function PersonasPage() {
  const [q, setQ] = useState('');
  const list = useLoad(() => get<List<Persona>>(`/personas${qs({ q, limit: 100 })}`), [q]);
  const teams = useLoad(() => get<List<Team>>('/business/teams?limit=100'), []);
  const [editing, setEditing] = useState<Persona | 'new' | null>(null);
  const [versionsOf, setVersionsOf] = useState<string | null>(null);
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
          teams={teams}
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
            <li key={p.id} className={versionsOf === p.id ? 'card wide' : 'card'}>
              <h2>{p.name}</h2>
              <p className="muted">
                {p.id} · version {p.version} · model {p.model ?? 'default'} · tools {p.tools.length ? p.tools.join(', ') : 'none'}
              </p>
              <p className="clip">{p.instructions}</p>
              {p.traits.length > 0 && <p>Traits: {p.traits.join(', ')}</p>}
              {handoffLine(p, teams.data?.data) && <p className="muted">{handoffLine(p, teams.data?.data)}</p>}
              <div className="row">
                <ScopedButton scope="write" className="secondary" onClick={() => setEditing(p)} aria-label={`Edit ${p.name}`}>
                  Edit
                </ScopedButton>
                <ScopedButton scope="write" className="danger" onClick={() => void remove(p)} aria-label={`Delete ${p.name}`}>
                  Delete
                </ScopedButton>
                <button
                  className="secondary"
                  onClick={() => setVersionsOf(versionsOf === p.id ? null : p.id)}
                  aria-expanded={versionsOf === p.id}
                  aria-label={`Versions of ${p.name}`}
                >
                  Versions
                </button>
              </div>
              {versionsOf === p.id && <Versions key={`${p.id}@${p.version}`} persona={p} onRestored={list.reload} />}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function PersonaForm({ persona, teams, onDone }: { persona: Persona | null; teams: Loaded<List<Team>>; onDone: () => void }) {
  const [name, setName] = useState(persona?.name ?? '');
  const [instructions, setInstructions] = useState(persona?.instructions ?? '');
  const [traits, setTraits] = useState(persona?.traits.join(', ') ?? '');
  const [model, setModel] = useState(persona?.model ?? '');
  const [tools, setTools] = useState(persona?.tools.join(', ') ?? '');
  const [temperature, setTemperature] = useState(persona?.temperature?.toString() ?? '');
  const [maxTokens, setMaxTokens] = useState(persona?.maxTokens?.toString() ?? '');
  const [teamId, setTeamId] = useState(persona?.teamId ?? '');
  const [handoffTool, setHandoffTool] = useState(persona?.handoff.tool ?? false);
  const [keywords, setKeywords] = useState(persona?.handoff.keywords.join('\n') ?? '');
  const [lowRating, setLowRating] = useState(persona?.handoff.lowRating ?? false);
  const teamList = teams.data?.data ?? [];
  const save = useAction();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void save.run(async () => {
      const body = {
        name,
        instructions,
        traits: splitList(traits),
        model: model.trim() || null,
        temperature: temperature.trim() === '' ? null : Number(temperature),
        maxTokens: maxTokens.trim() === '' ? null : Number(maxTokens),
        tools: splitList(tools),
        teamId: teamId || null,
        handoff: { tool: handoffTool, keywords: lines(keywords), lowRating },
      };
      if (persona) await api('PUT', `/personas/${persona.id}`, body);
      else await api('POST', '/personas', body);
      onDone();
    });
  };
  return (
    <form className="panel" onSubmit={submit} aria-label={persona ? `Edit ${persona.name}` : 'New persona'}>
      <h2>{persona ? `Edit ${persona.name}` : 'New persona'}</h2>
      {persona && <p className="muted">Saving a change adds version {persona.version + 1}; every earlier version stays and can be restored.</p>}
      <Field label="Name">{(id) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} required />}</Field>
      <Field label="Instructions">{(id) => <textarea id={id} rows={4} value={instructions} onChange={(e) => setInstructions(e.target.value)} required />}</Field>
      <Field label="Traits" hint="Comma-separated, e.g. friendly, concise">
        {(id) => <input id={id} value={traits} onChange={(e) => setTraits(e.target.value)} />}
      </Field>
      <Field label="Model" hint="Empty = the server's default">
        {(id) => <input id={id} value={model} onChange={(e) => setModel(e.target.value)} />}
      </Field>
      <div className="row">
        <Field label="Temperature" hint="0–2; empty = the server's default">
          {(id) => <input id={id} type="number" min={0} max={2} step="any" value={temperature} onChange={(e) => setTemperature(e.target.value)} />}
        </Field>
        <Field label="Max tokens" hint="Longest answer; empty = the server's default">
          {(id) => <input id={id} type="number" min={1} max={32000} step={1} value={maxTokens} onChange={(e) => setMaxTokens(e.target.value)} />}
        </Field>
      </div>
      <Field label="Tools allow-list" hint="Comma-separated tool.action or tool.*, e.g. knowledge.*">
        {(id) => <input id={id} value={tools} onChange={(e) => setTools(e.target.value)} />}
      </Field>
      <fieldset className="handoff-rules">
        <legend>Human handoff</legend>
        <p className="muted">
          With a team, the user can ask for a person by sending <code>/human</code>; the rules below hand conversations over too. Team members take them in the Inbox.
          These settings are not versioned.
        </p>
        <Field label="Team" hint="Whose members take over its conversations; no team: the persona never hands over">
          {(id) => (
            <select id={id} value={teamId} onChange={(e) => setTeamId(e.target.value)} disabled={teams.loading && !teams.data}>
              <option value="">No team</option>
              {teamId && !teamList.some((t) => t.id === teamId) && <option value={teamId}>{teamId}</option>}
              {teamList.map((t) => (
                <option key={t.id} value={t.id}>
                  {t.name} ({t.members.length} {t.members.length === 1 ? 'member' : 'members'})
                </option>
              ))}
            </select>
          )}
        </Field>
        <ProblemView error={teams.error} />
        {teams.data?.data.length === 0 && <p className="muted">No teams yet: create one with POST /business/teams.</p>}
        <Field label="Handoff keywords" hint="One a line (up to 20): a user message containing one (case ignored) goes to a person">
          {(id) => <textarea id={id} rows={3} value={keywords} onChange={(e) => setKeywords(e.target.value)} />}
        </Field>
        <label className="check">
          <input type="checkbox" checked={lowRating} onChange={(e) => setLowRating(e.target.checked)} /> Hand over after a rating of 1 or 2
        </label>
        <label className="check">
          <input type="checkbox" checked={handoffTool} onChange={(e) => setHandoffTool(e.target.checked)} /> Let the persona hand over itself (the built-in handoff tool)
        </label>
        {!teamId && (keywords.trim() || lowRating || handoffTool) && <p className="muted">These rules apply once the persona has a team.</p>}
      </fieldset>
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

const FIELDS = ['name', 'instructions', 'traits', 'model', 'temperature', 'maxTokens', 'tools'] as const;
type VersionField = (typeof FIELDS)[number];
const FIELD_LABEL: Record<VersionField, string> = {
  name: 'Name',
  instructions: 'Instructions',
  traits: 'Traits',
  model: 'Model',
  temperature: 'Temperature',
  maxTokens: 'Max tokens',
  tools: 'Tools allow-list',
};
const shown = (v: PersonaVersion[VersionField]) => (v === null ? 'server default' : Array.isArray(v) ? (v.length ? v.join(', ') : 'none') : String(v));

/** A persona's versions: who changed it and when, what changed between two, restore, and how each version did. */
function Versions({ persona, onRestored }: { persona: Persona; onRestored: () => void }) {
  const auth = useAuth();
  const admin = auth.can('admin');
  const pager = useCursor();
  const list = useLoad(
    () => get<List<PersonaVersion>>(`/personas/${persona.id}/versions${qs({ limit: 20, cursor: pager.cursor })}`),
    [persona.id, persona.version, pager.cursor],
  );
  // Key names for "by whom": listing keys is an admin call, so a lesser key sees the key ids.
  const keys = useLoad(() => (admin ? get<List<ApiKey>>('/auth/api-keys?limit=100') : Promise.resolve(undefined)), [admin]);
  const byWhom = (keyId: string | null) => {
    if (keyId === null) return 'before version history';
    const k = keys.data?.data.find((x) => x.id === keyId);
    return k ? `${k.name} (${k.prefix}…)` : keyId;
  };
  // A new version (an edit, a restore) remounts this view: it opens on what that version changed.
  const [from, setFrom] = useState(Math.max(1, persona.version - 1));
  const [to, setTo] = useState(persona.version);
  const act = useAction();
  const restore = (v: PersonaVersion) =>
    act.run(async () => {
      if (!confirm(`Restore version ${v.version} of “${persona.name}”? Its fields become current again as version ${persona.version + 1}; no version is lost.`)) return;
      await api('POST', `/personas/${persona.id}/versions/${v.version}/restore`);
      onRestored();
    });
  const numbers = Array.from({ length: persona.version }, (_, i) => persona.version - i);
  const pick = (label: string, value: number, set: (n: number) => void) => (
    <Field label={label}>
      {(id) => (
        <select id={id} value={value} onChange={(e) => set(Number(e.target.value))}>
          {numbers.map((n) => (
            <option key={n} value={n}>
              Version {n}
              {n === persona.version ? ' (current)' : ''}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
  return (
    <section className="versions" aria-label={`Versions of ${persona.name}`}>
      <h3>Versions</h3>
      {list.loading && !list.data && <Loading what="versions" />}
      <ProblemView error={list.error} />
      {list.data && (
        <table>
          <thead>
            <tr>
              <th scope="col">Version</th>
              <th scope="col">When</th>
              <th scope="col">By</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {list.data.data.map((v) => (
              <tr key={v.version}>
                <th scope="row">
                  {v.version}
                  {v.version === persona.version ? ' (current)' : ''}
                </th>
                <td>{when(v.createdAt)}</td>
                <td>{byWhom(v.createdBy)}</td>
                <td>
                  <div className="row">
                    {v.version > 1 && (
                      <button
                        className="link"
                        onClick={() => {
                          setFrom(v.version - 1);
                          setTo(v.version);
                        }}
                        aria-label={`Changes in version ${v.version}`}
                      >
                        changes
                      </button>
                    )}
                    {v.version !== persona.version && (
                      <ScopedButton scope="write" className="secondary" onClick={() => void restore(v)} aria-label={`Restore this version (v${v.version})`}>
                        Restore this version
                      </ScopedButton>
                    )}
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager pager={pager} nextCursor={list.data?.nextCursor} what="versions" />
      <ProblemView error={act.error} />
      <h4>Compare two versions</h4>
      {persona.version === 1 ? (
        <Empty>Only one version so far — edit the persona and each change adds the next.</Empty>
      ) : (
        <>
          <div className="row">
            {pick('Older version', from, setFrom)}
            {pick('Newer version', to, setTo)}
          </div>
          {from === to ? <p className="muted">Pick two different versions.</p> : <VersionDiff personaId={persona.id} from={from} to={to} />}
        </>
      )}
      <VersionAnalytics persona={persona} />
    </section>
  );
}

/** Field by field: a line diff of the instructions, the other fields old → new. */
function VersionDiff({ personaId, from, to }: { personaId: string; from: number; to: number }) {
  const pair = useLoad(
    () => Promise.all([get<PersonaVersion>(`/personas/${personaId}/versions/${from}`), get<PersonaVersion>(`/personas/${personaId}/versions/${to}`)]),
    [personaId, from, to],
  );
  if (pair.loading && !pair.data) return <Loading what="the two versions" />;
  if (pair.error) return <ProblemView error={pair.error} />;
  const [a, b] = pair.data!;
  const changed = FIELDS.filter((f) => JSON.stringify(a[f]) !== JSON.stringify(b[f]));
  const same = FIELDS.filter((f) => !changed.includes(f));
  return (
    <div className="diff-view" data-testid="version-diff">
      <p>
        From version {a.version} ({when(a.createdAt)}) to version {b.version} ({when(b.createdAt)}):{' '}
        {changed.length === 0 ? 'no field differs.' : `${changed.length} ${changed.length === 1 ? 'field' : 'fields'} changed.`}
      </p>
      {changed.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Field</th>
              <th scope="col">Change</th>
            </tr>
          </thead>
          <tbody>
            {changed.map((f) => (
              <tr key={f}>
                <th scope="row">{FIELD_LABEL[f]}</th>
                <td>
                  {f === 'instructions' ? (
                    <LineDiff lines={lineDiff(a.instructions, b.instructions)} />
                  ) : (
                    <span className="change">
                      <del>{shown(a[f])}</del> → <ins>{shown(b[f])}</ins>
                    </span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {same.length > 0 && changed.length > 0 && <p className="muted">Unchanged: {same.map((f) => FIELD_LABEL[f]).join(', ')}.</p>}
    </div>
  );
}

function LineDiff({ lines }: { lines: DiffLine[] }) {
  const added = lines.filter((l) => l.op === 'add').length;
  const removed = lines.filter((l) => l.op === 'del').length;
  return (
    <div className="line-diff" role="group" aria-label={`Instructions: ${added} ${added === 1 ? 'line' : 'lines'} added, ${removed} removed`}>
      {lines.map((l, i) =>
        l.op === 'add' ? (
          <ins key={i}>
            <span className="mark">+ </span>
            {l.text}
          </ins>
        ) : l.op === 'del' ? (
          <del key={i}>
            <span className="mark">− </span>
            {l.text}
          </del>
        ) : (
          <span key={i} className="same">
            <span className="mark">{'  '}</span>
            {l.text}
          </span>
        ),
      )}
    </div>
  );
}

interface VersionFigures {
  version: number | null;
  answers: number;
  errors: { count: number; rate: number };
  satisfaction: { average: number | null; count: number };
  latency: { avgMs: number | null; p50Ms: number | null; p95Ms: number | null };
  tokens: { prompt: number; completion: number };
}

/** How each version did: answers, errors, ratings, latency and tokens in a timeframe. */
function VersionAnalytics({ persona }: { persona: Persona }) {
  const [timeframe, setTimeframe] = useState('30d');
  const report = useLoad(
    () => get<{ versions: VersionFigures[] }>(`/business/analytics/versions${qs({ personaId: persona.id, timeframe })}`),
    [persona.id, persona.version, timeframe],
  );
  return (
    <>
      <div className="row">
        <h4>How each version did</h4>
        <Field label="Timeframe of the figures">
          {(id) => (
            <select id={id} value={timeframe} onChange={(e) => setTimeframe(e.target.value)}>
              <option value="7d">Last 7 days</option>
              <option value="30d">Last 30 days</option>
              <option value="90d">Last 90 days</option>
            </select>
          )}
        </Field>
      </div>
      {report.loading && !report.data && <Loading what="figures per version" />}
      <ProblemView error={report.error} />
      {report.data?.versions.length === 0 && <Empty>No answers in this timeframe — ask this persona in the Playground.</Empty>}
      {report.data && report.data.versions.length > 0 && (
        <table data-testid="version-analytics">
          <thead>
            <tr>
              <th scope="col">Version</th>
              <th scope="col">Answers</th>
              <th scope="col">Errors</th>
              <th scope="col">Satisfaction</th>
              <th scope="col">Latency p50 / p95</th>
              <th scope="col">Tokens (prompt / completion)</th>
            </tr>
          </thead>
          <tbody>
            {report.data.versions.map((v) => (
              <tr key={v.version ?? 'none'}>
                <th scope="row">{v.version ?? 'before versions'}</th>
                <td>{v.answers}</td>
                <td>
                  {v.errors.count} ({pct(v.errors.rate)})
                </td>
                <td>{v.satisfaction.average === null ? 'no ratings' : `${v.satisfaction.average.toFixed(2)} / 5 (${v.satisfaction.count})`}</td>
                <td>
                  {ms(v.latency.p50Ms)} / {ms(v.latency.p95Ms)}
                </td>
                <td>
                  {v.tokens.prompt} / {v.tokens.completion}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
