// Feedback where the user is looking: a fixed stack in the window's lower right corner, by
// the curation controls and in view whatever the page's scroll. Successes fade after a few seconds; errors stay until dismissed; a toast can
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
  toasts = [...toasts.filter((t) => t.text !== text), { id, text, kind, action }].slice(-MAX);
  emit();
  if (kind === "ok") window.setTimeout(() => dismiss(id), action ? 2 * OK_MS : OK_MS);
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
