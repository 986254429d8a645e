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

// Inputs that take typed text; checkboxes, radios and buttons leave the keys to the app.
const TEXT_INPUTS = new Set(["text", "search", "email", "url", "tel", "password", "number", "date", "datetime-local", "month", "time", "week"]);

/** Whether `el` takes typed keys itself: text inputs, text areas, selects, editable text. */
export function takesKeys(el: Element | null): boolean {
  if (!el) return false;
  if (el instanceof HTMLInputElement) return TEXT_INPUTS.has(el.type);
  return el instanceof HTMLTextAreaElement || el instanceof HTMLSelectElement || (el as HTMLElement).isContentEditable;
}

/** Whether a key press is one of the app's shortcuts: not typed into a text field, not
 * with Ctrl/Alt/Meta (the browser's and the system's), not while a dialog is open. */
export function isShortcut(e: KeyboardEvent): boolean {
  return !e.ctrlKey && !e.metaKey && !e.altKey && !takesKeys(e.target as Element | null) && !document.querySelector("dialog[open]");
}

/** The window's title for the view: "<what> · EpisodeLake". */
export function useTitle(what: string): void {
  useEffect(() => {
    document.title = `${what} · EpisodeLake`;
  }, [what]);
}
