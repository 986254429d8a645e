// Episode filters live in the URL's query string under the API's own parameter names, so
// a filtered view is a link, and the task tree, the list and the stats share one filter.
import type { EpisodeQuery } from "../api/client";

const TEXT_KEYS = ["task", "search", "policy_version", "run_id", "env", "tag", "set_id", "group_id", "where"] as const;
const NUMBER_KEYS = ["min_length", "max_length"] as const;

export function filtersFromQuery(q: URLSearchParams): EpisodeQuery {
  const f: EpisodeQuery = {};
  for (const k of TEXT_KEYS) {
    const v = q.get(k);
    if (v) f[k] = v;
  }
  for (const k of NUMBER_KEYS) {
    const v = q.get(k);
    if (v && !Number.isNaN(Number(v))) f[k] = Number(v);
  }
  const success = q.get("success");
  if (success === "true" || success === "false") f.success = success === "true";
  if (q.get("unjudged") === "true") f.unjudged = true;
  if (q.get("zero_step_reward") === "true") f.zero_step_reward = true;
  return f;
}

/** A filter as URL query parameters: what filtersFromQuery reads back. Flags that are off
 * and empty fields are left out (a saved view lists every field, most of them unset). */
export function queryFromFilters(f: Record<string, unknown>): URLSearchParams {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) {
    if (v === null || v === undefined || v === "" || (v === false && k !== "success")) continue;
    q.set(k, String(v));
  }
  return q;
}

/** Whether two filters select the same episodes as written: the same fields set to the same
 * values, unset fields and off flags aside (a saved view's stored filters against the
 * address bar's, to tell a view that was changed after it was opened). */
export function sameFilters(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const key = (f: Record<string, unknown>) => [...queryFromFilters(f).entries()].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([k, v]) => `${k}=${v}`).join("&");
  return key(a) === key(b);
}
