// Filing many episodes at once: every episode the list's filters match goes into a chosen
// set in one request (POST /api/sets/{id}/members with the filter), after the user confirms
// the count. Episodes already in the set keep their curation. Shown only while a filter
// narrows the list, so "everything" is never one click away.
import { useState } from "react";
import { useQuery } from "@tanstack/react-query";
import { api, call, type EpisodeFilter } from "../api/client";
import { invalidate, queries } from "../api/queries";
import { useLocation } from "../router";
import { ask } from "./Dialogs";
import { filtersFromQuery } from "./filters";
import { toast } from "./Toasts";

export function BulkAdd() {
  const { query } = useLocation();
  const filters = filtersFromQuery(query);
  const tasks = useQuery(queries.tasks(filters));
  const sets = useQuery(queries.sets());
  const [setId, setSetId] = useState("");
  const [busy, setBusy] = useState(false);
  if (Object.keys(filters).length === 0 || !tasks.data) return null;
  const matching = tasks.data.reduce((n, t) => n + t.successes + t.failures + t.unjudged, 0);
  if (matching === 0) return null;
  const target = sets.data?.find((s) => s.set_id === setId);
  const add = async () => {
    if (!target) return;
    const yes = await ask({
      title: `Add ${matching} episodes to ${target.name}?`,
      body: "Every episode the filters match is filed into the set; episodes already in it keep their category, step and note.",
      confirm: `Add ${matching}`,
    });
    if (!yes) return;
    setBusy(true);
    try {
      const r = await call(
        api.POST("/api/sets/{set_id}/members", { params: { path: { set_id: target.set_id } }, body: { filter: filters as EpisodeFilter } }),
      );
      toast(`Added ${r.added} to ${target.name}${r.already ? ` (${r.already} were in it already)` : ""}`);
      void invalidate(["sets"], ["episode"], ["audit"]);
    } catch (e) {
      toast(`Could not add the episodes to ${target.name}: ${(e as Error).message}`, "error");
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="bulk-add" data-testid="bulk-add">
      <span>{matching} matching</span>
      <select value={setId} onChange={(e) => setSetId(e.target.value)} aria-label="set to add the matching episodes to">
        <option value="">add all to set…</option>
        {sets.data?.map((s) => (
          <option key={s.set_id} value={s.set_id}>
            {s.name}
          </option>
        ))}
      </select>
      <button type="button" onClick={() => void add()} disabled={!target || busy}>
        Add
      </button>
    </div>
  );
}
