import { type ButtonHTMLAttributes, type ReactNode, useCallback, useEffect, useId, useState } from 'react';
import { ApiError } from './api';
import type { Scope } from './api';
import { useAuth } from './auth';

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

/** Loads once per `deps` change; `reload` asks again. The screen shows only what the API said. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, loading: false }),
      (error: unknown) => live && setState({ error, loading: false }),
    );
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data: state.data, error: state.error, loading: state.loading, reload };
}

/** A button a key without `scope` cannot use: disabled, with the reason next to it. */
export function ScopedButton({ scope, children, ...rest }: { scope: Scope } & ButtonHTMLAttributes<HTMLButtonElement>) {
  const auth = useAuth();
  const reason = auth.lacks(scope);
  const id = useId();
  if (!reason) return <button {...rest}>{children}</button>;
  return (
    <span className="scoped">
      <button {...rest} disabled aria-describedby={id}>
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
