// The annotation queue: the episodes the filters select, in the list's order, stepped
// through with ] and [ (next and previous episode) while curating; "12 of 240" says where
// the replay is (GET /api/episodes/{id}/queue answers the place and the neighbours).
import { useEffect } from "react";
import { useQuery } from "@tanstack/react-query";
import { queries, queryClient } from "../api/queries";
import { isShortcut } from "../hooks";
import { enc, navigate, useLocation, withQuery } from "../router";
import { filtersFromQuery } from "./filters";

export function QueueBar({ episodeId }: { episodeId: string }) {
  const { query } = useLocation();
  const filters = filtersFromQuery(query);
  const place = useQuery(queries.queue(episodeId, filters));
  const q = place.data;
  // The neighbours' details load while the user curates this one, so ] and [ open at once.
  useEffect(() => {
    for (const id of [q?.next, q?.previous]) if (id) void queryClient.prefetchQuery(queries.episode(id));
  }, [q?.next, q?.previous]);
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
