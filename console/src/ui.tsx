import { type ButtonHTMLAttributes, type ReactNode, useCallback, useEffect, useId, useRef, useState } from 'react';
import { ApiError, get, type List, parsePersonaRef, type PersonaVersion } from './api';
import { type Requirement, useAuth } from './auth';

/** A problem+json shown readably, with the fields it names. */
export function ProblemView({ error }: { error: unknown }) {
  if (!error) return null;
  if (error instanceof ApiError) {
    const p = error.problem;
    return (
      <div className="problem" role="alert">
        <strong>{p.title ?? 'Error'}</strong>
        {p.status ? ` (${p.status})` : ''}
        {p.detail ? `: ${p.detail}` : ''}
        {p.errors && p.errors.length > 0 && (
          <ul>
            {p.errors.map((e, i) => (
              <li key={i}>
                <code>{e.path || '(body)'}</code>: {e.message}
              </li>
            ))}
          </ul>
        )}
      </div>
    );
  }
  return (
    <div className="problem" role="alert">
      {error instanceof Error ? error.message : String(error)}
    </div>
  );
}

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

/**
 * Loads once per `deps` change; `reload` asks again. The screen shows only what the API said.
 * `every` (ms): also asks again that often while the page is visible (not in a background tab); a
 * refresh that fails keeps the last answer beside its error.
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[], opts: { every?: number } = {}): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  const polled = useRef(false);
  useEffect(() => {
    let live = true;
    const keep = polled.current;
    polled.current = false;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, loading: false }),
      (error: unknown) => live && setState((s) => ({ ...(keep ? { data: s.data } : {}), error, loading: false })),
    );
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const refresh = useCallback(() => {
    polled.current = true;
    setTick((t) => t + 1);
  }, []);
  usePoll(refresh, opts.every);
  return { data: state.data, error: state.error, loading: state.loading, reload };
}

/** Calls `fn` every `ms` while the page is visible, and at once when it becomes visible again; no `ms`: never. */
export function usePoll(fn: () => void, ms: number | undefined) {
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => {
    if (!ms) return;
    let timer: ReturnType<typeof setInterval> | undefined;
    const start = () => {
      if (timer === undefined && document.visibilityState === 'visible') timer = setInterval(() => latest.current(), ms);
    };
    const stop = () => {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
    };
    const onVisibility = () => {
      if (document.visibilityState === 'visible') {
        latest.current();
        start();
      } else stop();
    };
    start();
    document.addEventListener('visibilitychange', onVisibility);
    return () => {
      stop();
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, [ms]);
}

/** A button the caller's role cannot use (`scope`: a key scope, mapped onto its role, or a role): disabled, with the reason next to it and as its title. */
export function ScopedButton({ scope, children, ...rest }: { scope: Requirement } & ButtonHTMLAttributes<HTMLButtonElement>) {
  const auth = useAuth();
  const reason = auth.lacks(scope);
  const id = useId();
  if (!reason) return <button {...rest}>{children}</button>;
  return (
    <span className="scoped">
      <button {...rest} disabled aria-describedby={id} title={reason}>
        {children}
      </button>
      <small id={id} className="reason">
        {reason}
      </small>
    </span>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p className="muted" role="status">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="empty">{children}</p>;
}

export function Field({ label, children, hint }: { label: string; children: (id: string) => ReactNode; hint?: string }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children(id)}
      {hint && <small className="muted">{hint}</small>}
    </div>
  );
}

/** A labelled persona picker; `none` names the empty choice ("All personas", "Choose a persona"…). */
export function PersonaSelect(props: {
  label: string;
  personas: ReadonlyArray<{ id: string; name: string }> | undefined;
  value: string;
  onChange: (id: string) => void;
  none: string;
  required?: boolean;
}) {
  return (
    <Field label={props.label}>
      {(id) => (
        <select id={id} value={props.value} onChange={(e) => props.onChange(e.target.value)} required={props.required}>
          <option value="">{props.none}</option>
          {(props.personas ?? []).map((p) => (
            <option key={p.id} value={p.id}>
              {p.name}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}

export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');

/** Runs an action, keeping its error to show; returns whether it succeeded. */
export function useAction() {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const run = useCallback(async (fn: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
      return true;
    } catch (e) {
      setError(e);
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  return { error, busy, run, setError };
}

export function download(blob: Blob, name: string) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** A persona reference (`per_…` or `per_…@n`) by name: "Support" or "Support v2". */
export function refLabel(ref: string, personas: ReadonlyArray<{ id: string; name: string }> | undefined): string {
  const { personaId, version } = parsePersonaRef(ref);
  const name = personas?.find((p) => p.id === personaId)?.name ?? personaId;
  return version === null ? name : `${name} v${version}`;
}

/**
 * A labelled picker of one persona's versions; "" is its current version (whichever it is when
 * used). `value` is the version number as text.
 */
export function VersionSelect(props: { label: string; personaId: string; value: string; onChange: (v: string) => void; current: string; hint?: string }) {
  const { personaId } = props;
  const versions = useLoad(
    () => (personaId ? get<List<PersonaVersion>>(`/personas/${personaId}/versions?limit=100`) : Promise.resolve(undefined)),
    [personaId],
  );
  return (
    <Field label={props.label} {...(props.hint ? { hint: props.hint } : {})}>
      {(id) => (
        <select id={id} value={props.value} onChange={(e) => props.onChange(e.target.value)} disabled={!personaId}>
          <option value="">
            {props.current}
            {versions.data?.data[0] ? ` (now version ${versions.data.data[0].version})` : ''}
          </option>
          {versions.data?.data.map((v) => (
            <option key={v.version} value={String(v.version)}>
              Version {v.version} · {when(v.createdAt)}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}

/** Cursor paging for one list: the cursors of the pages before this one. */
export function useCursor() {
  const [stack, setStack] = useState<string[]>([]);
  return {
    cursor: stack.at(-1),
    page: stack.length + 1,
    next: useCallback((c: string) => setStack((s) => [...s, c]), []),
    prev: useCallback(() => setStack((s) => s.slice(0, -1)), []),
    reset: useCallback(() => setStack([]), []),
  };
}

/** Previous / next page buttons under a paged list. */
export function Pager({ pager, nextCursor, what }: { pager: ReturnType<typeof useCursor>; nextCursor: string | null | undefined; what: string }) {
  if (pager.page === 1 && !nextCursor) return null;
  return (
    <div className="row pager">
      <button className="secondary" onClick={pager.prev} disabled={pager.page === 1} aria-label={`Previous page of ${what}`}>
        Previous
      </button>
      <span className="muted">Page {pager.page}</span>
      <button className="secondary" onClick={() => nextCursor && pager.next(nextCursor)} disabled={!nextCursor} aria-label={`Next page of ${what}`}>
        Next
      </button>
    </div>
  );
}

/** 0.4567 → "45.7 %"; null → "—". */
export const pct = (v: number | null | undefined, digits = 1) => (v === null || v === undefined ? '—' : `${(v * 100).toFixed(digits)} %`);
/** A number to `digits` places, or "—". */
export const num = (v: number | null | undefined, digits = 2) => (v === null || v === undefined ? '—' : v.toFixed(digits));
/** Milliseconds, rounded, or "—". */
export const ms = (v: number | null | undefined) => (v === null || v === undefined ? '—' : `${Math.round(v)} ms`);
