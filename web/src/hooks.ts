import { useCallback, useEffect, useRef, useState } from "react";

export interface Loaded<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  reload: () => void;
}

/** Runs `load` when `deps` change; stale answers (from older deps) are dropped. A reload
 * keeps showing the current data until the new answer arrives (no flash of "Loading"). */
export function useApi<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: Error; loading: boolean }>({ loading: true });
  const [nonce, setNonce] = useState(0);
  const lastKey = useRef<string>("");
  const key = JSON.stringify(deps);
  useEffect(() => {
    let live = true;
    const sameDeps = lastKey.current === key;
    lastKey.current = key;
    setState((s) => ({ data: sameDeps ? s.data : undefined, loading: true }));
    load().then(
      (data) => live && setState({ data, loading: false }),
      (error: Error) => live && setState({ error, loading: false }),
    );
    return () => {
      live = false;
    };
  }, [key, nonce]); // `load` is a new closure each render; `key` stands for what it reads
  const reload = useCallback(() => setNonce((n) => n + 1), []);
  return { data: state.data, error: state.error, loading: state.loading, reload };
}

/** Calls `reload` every `ms` while `active`: views of jobs that are still running follow them. */
export function useRefreshWhile(active: boolean, reload: () => void, ms = 1000): void {
  useEffect(() => {
    if (!active) return;
    const timer = window.setInterval(reload, ms);
    return () => window.clearInterval(timer);
  }, [active, reload, ms]);
}

export interface Action {
  /** The last failure's message, until an action succeeds. */
  error: string | undefined;
  /** True while an action runs. */
  busy: boolean;
  run: (action: () => Promise<unknown>) => Promise<void>;
}

/** Runs what the user started (a form submit, a button) and keeps its outcome for the view:
 * a failure is shown, never thrown away. */
export function useAction(): Action {
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const run = async (action: () => Promise<unknown>) => {
    setBusy(true);
    try {
      await action();
      setError(undefined);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return { error, busy, run };
}

/** Keys typed into inputs are text, not shortcuts. */
export function isTyping(e: KeyboardEvent): boolean {
  const t = e.target as HTMLElement | null;
  return !!t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
}
