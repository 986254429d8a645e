// The keyboard shortcuts, in one table: press ? (or the Keys button) to see them.
import { useEffect, useRef, useState } from "react";
import { isShortcut } from "../hooks";

export const KEYS: [string, string][] = [
  ["/", "search episodes by id, task or goal"],
  ["A / D, ← / →", "previous / next step"],
  ["Home / End", "first / last step"],
  ["[ / ]", "previous / next episode in the list (the annotation queue)"],
  ["1 – 5", "file the episode under a failure category"],
  ["F", "mark this step as the failing step"],
  ["O", "show or hide the drawn action"],
  ["Z", "zoom the screenshot"],
  ["Shift+A / Shift+D", "Compare: previous / next step"],
  ["Escape", "leave a text box; the keys work again"],
  ["?", "this list"],
];

export function KeysHelp() {
  const dialog = useRef<HTMLDialogElement>(null);
  const [open, setOpen] = useState(false);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== "?" || !isShortcut(e)) return;
      e.preventDefault();
      setOpen(true);
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
  useEffect(() => {
    const d = dialog.current;
    if (open && d && !d.open) d.showModal();
    if (!open && d?.open) d.close();
  }, [open]);
  return (
    <>
      <button type="button" className="keys-button" onClick={() => setOpen(true)} title="keyboard shortcuts (?)">
        Keys
      </button>
      <dialog ref={dialog} className="confirm" aria-labelledby="keys-title" onClose={() => setOpen(false)} data-testid="keys-help">
        <h2 id="keys-title">Keyboard shortcuts</h2>
        <table className="keys">
          <tbody>
            {KEYS.map(([keys, what]) => (
              <tr key={keys}>
                <th scope="row">
                  <kbd>{keys}</kbd>
                </th>
                <td>{what}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <div className="dialog-buttons">
          <button type="button" autoFocus onClick={() => setOpen(false)}>
            Close
          </button>
        </div>
      </dialog>
    </>
  );
}
