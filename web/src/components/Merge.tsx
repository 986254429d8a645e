// Forms over rows teammates edit too (a set, a saved view, a saved query). The row as stored
// keeps arriving (live updates, a refused save's refetch) without wiping what the user
// typed: `useMerge` keeps the user's edits apart from the stored row (see merge.ts), a field
// a teammate changed meanwhile shows their value beside it ("take theirs" / "keep mine"), and
// a save sends only the user's fields, with the version they were merged against in If-Match
// (the server refuses a stale one; the form then shows what changed).
import { useEffect, useState, type ReactNode } from "react";
import { changes, conflicts, edit, keepMine, shown, takeTheirs, type Edits } from "./merge";
import { Time } from "./Time";

export interface Versioned {
  version?: number;
  changed_by?: string | null;
  changed_at?: string | null;
}

export interface Merge {
  /** What the field shows: the user's value, else the stored one. */
  value: (field: string) => unknown;
  set: (field: string, value: unknown) => void;
  /** Fields a teammate changed, differently, while the user was editing them. */
  conflicts: string[];
  theirs: (field: string) => unknown;
  takeTheirs: (field: string) => void;
  keepMine: (field: string) => void;
  /** The user's fields that differ from the stored row: what a save sends. */
  changes: () => Record<string, unknown>;
  dirty: boolean;
  /** The version a save is made from (the stored row's, which the form shows merged). */
  version: number;
  /** After a save (or to drop the user's edits). */
  clear: () => void;
}

/** A form's edits over `stored`, the row as the server last answered it; `key` names the
 * row (another row starts with no edits). */
export function useMerge(stored: (Versioned & object) | undefined, key: string): Merge {
  const [edits, setEdits] = useState<Edits>({});
  useEffect(() => setEdits({}), [key]);
  const row = (stored ?? {}) as Record<string, unknown>;
  const sent = changes(edits, row);
  return {
    value: (f) => shown(edits, row, f),
    set: (f, v) => setEdits((e) => edit(e, f, v, row[f])),
    conflicts: conflicts(edits, row),
    theirs: (f) => row[f],
    takeTheirs: (f) => setEdits((e) => takeTheirs(e, f)),
    keepMine: (f) => setEdits((e) => keepMine(e, f, row[f])),
    changes: () => sent,
    dirty: Object.keys(sent).length > 0,
    version: stored?.version ?? 0,
    clear: () => setEdits({}),
  };
}

const text = (v: unknown) => (v === null || v === undefined || v === "" ? "(empty)" : typeof v === "object" ? JSON.stringify(v) : String(v));

/** Beside a field a teammate changed while the user edited it: their value, and the choice. */
export function Theirs({ merge, field, label, render = text }: { merge: Merge; field: string; label: string; render?: (v: unknown) => ReactNode }) {
  if (!merge.conflicts.includes(field)) return null;
  return (
    <span className="theirs" role="group" aria-label={`newer ${label}`} data-testid={`theirs-${field}`}>
      <span className="muted">theirs:</span> <span className="theirs-value">{render(merge.theirs(field))}</span>{" "}
      <button type="button" className="link" onClick={() => merge.takeTheirs(field)} aria-label={`take theirs (${label})`}>
        take theirs
      </button>{" "}
      <button type="button" className="link" onClick={() => merge.keepMine(field)} aria-label={`keep mine (${label})`}>
        keep mine
      </button>
    </span>
  );
}

/** Over a form with conflicts: who saved the newer version, when, and what to do. */
export function ChangedMeanwhile({ stored, count, what }: { stored: Versioned | undefined; count: number; what: string }) {
  if (count === 0 || !stored) return null;
  return (
    <div className="conflict" role="alert" data-testid="conflict">
      <strong>{stored.changed_by ?? "Someone"}</strong> saved a newer version of this {what} (version {stored.version}) at{" "}
      <Time value={stored.changed_at} seconds /> while you were editing. Their value is shown beside {count === 1 ? "the field" : `${count} fields`} you
      changed too: take theirs or keep yours, then save.
    </div>
  );
}
