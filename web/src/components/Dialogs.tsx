// In-app confirmations instead of window.confirm: `ask(...)` resolves true when the user
// confirms. A modal <dialog> traps focus, Escape cancels, and focus returns to where it was.
import { useEffect, useRef, useSyncExternalStore } from "react";

export interface Question {
  title: string;
  body: string;
  confirm: string;
  cancel?: string;
  danger?: boolean;
}

interface Pending extends Question {
  answer: (yes: boolean) => void;
}

let pending: Pending | null = null;
const listeners = new Set<() => void>();

function set(p: Pending | null): void {
  pending = p;
  listeners.forEach((l) => l());
}

/** Ask the user; a question asked while another is open answers the older one "no". */
export function ask(question: Question): Promise<boolean> {
  pending?.answer(false);
  return new Promise((resolve) => {
    const entry: Pending = {
      ...question,
      answer: (yes) => {
        if (pending === entry) set(null);
        resolve(yes);
      },
    };
    set(entry);
  });
}

function subscribe(l: () => void): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

export function DialogHost() {
  const q = useSyncExternalStore(subscribe, () => pending);
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = dialog.current;
    if (q && d && !d.open) d.showModal();
    if (!q && d?.open) d.close();
  }, [q]);
  return (
    <dialog ref={dialog} className="confirm" aria-labelledby="dialog-title" onCancel={() => q?.answer(false)}>
      {q && (
        <form method="dialog" onSubmit={(e) => e.preventDefault()}>
          <h2 id="dialog-title">{q.title}</h2>
          <p>{q.body}</p>
          <div className="dialog-buttons">
            <button type="button" autoFocus onClick={() => q.answer(false)}>
              {q.cancel ?? "Cancel"}
            </button>
            <button type="button" className={q.danger ? "danger-solid" : "primary"} onClick={() => q.answer(true)}>
              {q.confirm}
            </button>
          </div>
        </form>
      )}
    </dialog>
  );
}
