// Ticking episodes in a list to file them together: a click ticks or unticks one; a
// shift-click ticks every episode shown between the last one ticked and this one.

export interface Ticked {
  ids: ReadonlySet<string>;
  /** The episode ticked last: where a shift-click's range starts. */
  anchor: string | null;
}

export const NONE_TICKED: Ticked = { ids: new Set(), anchor: null };

/** The ticks after a click on `id`'s box. `shown` is the list in display order; a range
 * whose start is no longer shown (its task closed, the filters changed) is just this one. */
export function tick(shown: readonly string[], before: Ticked, id: string, shift: boolean): Ticked {
  const from = before.anchor === null ? -1 : shown.indexOf(before.anchor);
  const to = shown.indexOf(id);
  const ids = new Set(before.ids);
  if (shift && from >= 0 && to >= 0) {
    for (const i of shown.slice(Math.min(from, to), Math.max(from, to) + 1)) ids.add(i);
    return { ids, anchor: id };
  }
  if (ids.has(id)) {
    ids.delete(id);
    return { ids, anchor: before.anchor === id ? null : before.anchor };
  }
  ids.add(id);
  return { ids, anchor: id };
}
