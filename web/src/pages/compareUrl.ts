// Compare's address, shared by the Compare page and the links that open it (the replay's
// "Compare with", a parent's "Compare at step K"), so those links need not load the page.
import { enc } from "../url";

/** How many episodes fit side by side (each column keeps a readable screenshot at 1280 px). */
export const MAX_COMPARED = 6;

/** The compared episodes' ids from the address `/compare/<a>/<b>/...` (each segment encoded
 * with `enc`, so an id may hold `/`), once each, at most MAX_COMPARED. */
export function comparedIds(path: string): string[] {
  const rest = path.replace(/^\/compare\/?/, "");
  const ids = rest.split("/").filter(Boolean).map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
  return [...new Set(ids)].slice(0, MAX_COMPARED);
}

/** The alignment step of a comparison (`?align=K`): rows are the episodes' step numbers and
 * step K, where branches left their parent, is marked; null when the address has none. */
export function alignOf(query: URLSearchParams): number | null {
  const raw = query.get("align");
  if (raw == null || raw.trim() === "") return null;
  const k = Number(raw);
  return Number.isInteger(k) && k >= 0 ? k : null;
}

/** The address comparing `ids` at `step` (aligned at step `align` when given). */
export function compareUrl(ids: string[], step: number, align?: number | null): string {
  return `/compare/${ids.map(enc).join("/")}?step=${step}${align != null ? `&align=${align}` : ""}`;
}
