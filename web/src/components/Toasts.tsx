// Feedback where the user is looking: a fixed stack at the top of the window, under the top bar and clear of
// the curation controls and the note box, in view whatever the page's scroll. Successes fade after a few seconds, errors after 15 s or when the next toast comes; a toast can
// carry one action (Undo). Announced to screen readers (status for news, alert for errors).
import { useSyncExternalStore } from "react";

export interface ToastAction {
  label: string;
  run: () => void;
}

interface Toast {
  id: number;
  text: string;
  kind: "ok" | "error";
  action?: ToastAction;
}

let toasts: Toast[] = [];
let nextId = 1;
const listeners = new Set<() => void>();
const OK_MS = 4000;
/** An error stays this long unless dismissed or replaced: long enough to read twice. */
const ERROR_MS = 15000;
const MAX = 4;

function emit(): void {
  listeners.forEach((l) => l());
}

function dismiss(id: number): void {
  toasts = toasts.filter((t) => t.id !== id);
  emit();
}

/** Show `text`; an error stays until dismissed, a success for a few seconds (longer with an action). */
export function toast(text: string, kind: "ok" | "error" = "ok", action?: ToastAction): void {
  const id = nextId++;
  toasts = [...stillRelevant(toasts, text), { id, text, kind, action }].slice(-MAX);
  emit();
  window.setTimeout(() => dismiss(id), kind === "error" ? ERROR_MS : action ? 2 * OK_MS : OK_MS);
}

/** What stays when a new toast comes: never the same text twice, and no stale error (a new
 * error replaces the last one; a success means the user moved on), so old errors do not
 * pile up over the controls by the corner. */
export function stillRelevant<T extends { text: string; kind: "ok" | "error" }>(list: T[], text: string): T[] {
  return list.filter((t) => t.text !== text && t.kind !== "error");
}

function subscribe(l: () => void): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

export function Toasts() {
  const list = useSyncExternalStore(subscribe, () => toasts);
  return (
    <div className="toasts" data-testid="toast">
      {list.map((t) => (
        <div key={t.id} className={`toast toast-${t.kind}`} role={t.kind === "error" ? "alert" : "status"}>
          <span>{t.text}</span>
          {t.action && (
            <button
              type="button"
              onClick={() => {
                dismiss(t.id);
                t.action!.run();
              }}
            >
              {t.action.label}
            </button>
          )}
          <button type="button" className="link" aria-label="dismiss" onClick={() => dismiss(t.id)}>
            ✕
          </button>
        </div>
      ))}
    </div>
  );
}
