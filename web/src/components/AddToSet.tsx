// Filing many episodes into a set the user picks by name, after confirming the count: one
// request (POST /api/sets/{id}/members) with the episodes named by id or by the list's
// filter. Shared by "all matching the filter" (BulkAdd) and the ticked episodes of the task
// tree (SelectionBar). Episodes already in the set keep their curation.
import { useState } from "react";
import { useQuery } from "@tanstack/react-query";
import { api, call, type EpisodeFilter } from "../api/client";
import { invalidate, queries } from "../api/queries";
import { ask } from "./Dialogs";
import { toast } from "./Toasts";

/** The episodes to file: by id, or every one the episode list's filter matches. */
export type Filed = { episode_ids: string[] } | { filter: EpisodeFilter };

export function AddToSet({ count, episodes, pickLabel, placeholder, why, onAdded }: {
  count: number;
  episodes: Filed;
  /** The set picker's accessible name. */
  pickLabel: string;
  /** The picker's first, empty choice, which says what it is for. */
  placeholder: string;
  /** The confirmation's first sentence: which episodes go in. */
  why: string;
  onAdded?: () => void;
}) {
  const sets = useQuery(queries.sets());
  const [setId, setSetId] = useState("");
  const [busy, setBusy] = useState(false);
  const target = sets.data?.find((s) => s.set_id === setId);
  const add = async () => {
    if (!target) return;
    const yes = await ask({
      title: `Add ${count} episodes to ${target.name}?`,
      body: `${why}; episodes already in it keep their category, step and note.`,
      confirm: `Add ${count}`,
    });
    if (!yes) return;
    setBusy(true);
    try {
      const r = await call(api.POST("/api/sets/{set_id}/members", { params: { path: { set_id: target.set_id } }, body: episodes }));
      toast(`Added ${r.added} to ${target.name}${r.already ? ` (${r.already} were in it already)` : ""}`);
      void invalidate(["sets"], ["episode"], ["audit"]);
      onAdded?.();
    } catch (e) {
      toast(`Could not add the episodes to ${target.name}: ${(e as Error).message}`, "error");
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <select value={setId} onChange={(e) => setSetId(e.target.value)} aria-label={pickLabel}>
        <option value="">{placeholder}</option>
        {sets.data?.map((s) => (
          <option key={s.set_id} value={s.set_id}>
            {s.name}
          </option>
        ))}
      </select>
      <button type="button" onClick={() => void add()} disabled={!target || busy}>
        Add
      </button>
    </>
  );
}
