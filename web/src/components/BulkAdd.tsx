// Filing many episodes at once: every episode the list's filters match goes into a chosen
// set in one request (the filter, not the ids), after the user confirms the count. Shown
// only while a filter narrows the list, so "everything" is never one click away.
import { useQuery } from "@tanstack/react-query";
import type { EpisodeFilter } from "../api/client";
import { queries } from "../api/queries";
import { useLocation } from "../router";
import { AddToSet } from "./AddToSet";
import { filtersFromQuery } from "./filters";

export function BulkAdd() {
  const { query } = useLocation();
  const filters = filtersFromQuery(query);
  const tasks = useQuery(queries.tasks(filters));
  if (Object.keys(filters).length === 0 || !tasks.data) return null;
  const matching = tasks.data.reduce((n, t) => n + t.successes + t.failures + t.unjudged, 0);
  if (matching === 0) return null;
  return (
    <div className="bulk-add" data-testid="bulk-add">
      <span>{matching} matching</span>
      <AddToSet
        count={matching}
        episodes={{ filter: filters as EpisodeFilter }}
        pickLabel="set to add the matching episodes to"
        placeholder="add all to set…"
        why="Every episode the filters match is filed into the set"
      />
    </div>
  );
}
