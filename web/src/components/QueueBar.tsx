// The annotation queue: the episodes the filters select, in the list's order, stepped
// through with ] and [ (next and previous episode) while curating; "12 of 240" says where
// the replay is (GET /api/episodes/{id}/queue answers the place and the neighbours).
import { useEffect } from "react";
import { api, call } from "../api/client";
import { isShortcut, useApi } from "../hooks";
import { enc, navigate, useLocation, withQuery } from "../router";
import { filterKey, filtersFromQuery } from "./filters";
import { useLiveReload } from "./Live";

export function QueueBar({ episodeId }: { episodeId: string }) {
  const { query } = useLocation();
  const filters = filtersFromQuery(query);
  const place = useApi(
    () => call(api.GET("/api/episodes/{episode_id}/queue", { params: { path: { episode_id: episodeId }, query: filters } })),
    [episodeId, filterKey(filters)],
  );
  useLiveReload(place.reload);
  const q = place.data;
  const open = (id: string | null | undefined) => id && navigate(withQuery(`/episodes/${enc(id)}/steps/0`, query));
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (!isShortcut(e)) return;
      if (e.key === "]") open(q?.next);
      else if (e.key === "[") open(q?.previous);
      else return;
      e.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  });
  const filtered = Object.keys(filters).length > 0;
  return (
    <div className="queue" data-testid="queue">
      <button type="button" onClick={() => open(q?.previous)} disabled={!q?.previous} aria-label="previous episode" title="previous episode ([)">
        ◀ <kbd>[</kbd>
      </button>
      <span data-testid="queue-position" aria-live="polite">
        {place.error
          ? `queue unavailable: ${place.error.message}`
          : !q
            ? "…"
            : q.position === null
              ? `not in this list of ${q.total}`
              : `${q.position} of ${q.total}`}
      </span>
      <span className="muted">{filtered ? "filtered episodes" : "episodes"}, newest first</span>
      <button type="button" onClick={() => open(q?.next)} disabled={!q?.next} aria-label="next episode" title="next episode (])">
        <kbd>]</kbd> ▶
      </button>
    </div>
  );
}
