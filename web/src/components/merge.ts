// Editing a row a teammate may save at the same time (a set, a saved view, a saved query):
// the plain logic behind Merge.tsx. The form shows the stored row's values, except the
// fields the user edited, which keep the user's value and remember what the field held when
// they began (`from`). A teammate's newer version then changes only the fields nobody is
// editing here; a field both changed is a conflict: the form shows theirs beside it, and the
// user takes theirs or keeps theirs own before saving, with the newer version in If-Match.

/** One edited field: the user's value and the stored value it was edited from. */
export interface Edit {
  mine: unknown;
  from: unknown;
}

export type Edits = Record<string, Edit>;

/** Whether two field values are the same (objects by their JSON with sorted keys). */
export function same(a: unknown, b: unknown): boolean {
  return stable(a) === stable(b);
}

function stable(v: unknown): string {
  if (v === undefined || v === "") return "null"; // an empty text box and a cleared field are one
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(stable).join(",")}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .filter((k) => o[k] !== undefined && o[k] !== null)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${stable(o[k])}`)
    .join(",")}}`;
}

/** The edits after the user sets `field` to `value` over the stored `stored` value. Setting a
 * field back to the stored value (and the value it was edited from) is no edit any more. */
export function edit(edits: Edits, field: string, value: unknown, stored: unknown): Edits {
  const from = field in edits ? edits[field].from : stored;
  const next = { ...edits, [field]: { mine: value, from } };
  if (same(value, stored) && same(from, stored)) delete next[field];
  return next;
}

/** What the form shows for `field`: the user's value, else the stored one. */
export function shown(edits: Edits, stored: Record<string, unknown>, field: string): unknown {
  return field in edits ? edits[field].mine : stored[field];
}

/** The fields a teammate changed while the user was editing them, to something else than
 * the user's value: each needs "take theirs" or "keep mine" before a save. */
export function conflicts(edits: Edits, stored: Record<string, unknown>): string[] {
  return Object.entries(edits)
    .filter(([f, e]) => !same(stored[f], e.from) && !same(stored[f], e.mine))
    .map(([f]) => f);
}

/** Theirs wins `field`: the edit is dropped and the form shows the stored value. */
export function takeTheirs(edits: Edits, field: string): Edits {
  const next = { ...edits };
  delete next[field];
  return next;
}

/** Mine wins `field`: the edit now counts as made from the stored value (seen, overruled). */
export function keepMine(edits: Edits, field: string, stored: unknown): Edits {
  return field in edits ? { ...edits, [field]: { ...edits[field], from: stored } } : edits;
}

/** What a save sends: the edited fields whose value differs from the stored one. Fields the
 * user did not touch are not sent, so a save never writes back a value a teammate replaced. */
export function changes(edits: Edits, stored: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(edits).filter(([f, e]) => !same(e.mine, stored[f])).map(([f, e]) => [f, e.mine]));
}
