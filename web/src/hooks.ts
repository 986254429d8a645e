import { useEffect, useState } from "react";
import { useMutation } from "@tanstack/react-query";

export interface Action {
  /** The last failure's message, until an action succeeds. */
  error: string | undefined;
  /** True while an action runs. */
  busy: boolean;
  run: (action: () => Promise<unknown>) => void;
}

/** Runs what the user started (a form submit, a button) and keeps its outcome for the view:
 * a failure is shown, never thrown away. */
export function useAction(): Action {
  const mutation = useMutation({ mutationFn: (action: () => Promise<unknown>) => action() });
  return { error: mutation.error?.message, busy: mutation.isPending, run: mutation.mutate };
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

/** A control's value that the address owns but that shows a change at once. The router renders
 * a new address in a transition, so a control bound to the address alone springs back to its
 * old value until then (a ticked box shows unticked). `value` is what the address says; the
 * shown value follows it whenever it changes. */
export function useAddressValue<T>(value: T, key: string): [T, (shown: T) => void] {
  const [shown, setShown] = useState(value);
  useEffect(() => setShown(value), [key]);
  return [shown, setShown];
}
