// Curation in place, into the set the user chose (remembered in this browser; never a set
// picked for them): keys 1-5 set the episode's failure category, F marks the current step
// as the failing one, and the note is saved with the member. A category key never moves
// the failing step. Each change is one API call, durable in the lake when it returns; the
// outcome shows as a toast, in view whatever the panel's scroll.
import { useEffect, useRef, useState } from "react";
import { useQuery } from "@tanstack/react-query";
import { api, call, FAILURE_CATEGORIES, type EpisodeDetail, type FailureCategory, type Membership } from "../api/client";
import { invalidate, queries } from "../api/queries";
import { isShortcut } from "../hooks";
import { Link, enc, useLeaveGuard } from "../router";
import { count } from "./Time";
import { toast } from "./Toasts";

const SET_KEY = "elake.curation.set";

type Put = { failure_category: FailureCategory | null; failing_step: number | null; note: string | null };

export function CurationPanel({ detail, stepNo }: { detail: EpisodeDetail; stepNo: number }) {
  const sets = useQuery(queries.sets());
  const [setId, setSetId] = useState(() => localStorage.getItem(SET_KEY) ?? "");
  const [newName, setNewName] = useState("");
  const select = useRef<HTMLSelectElement>(null);
  const episodeId = detail.episode.episode_id;
  const chosen = sets.data?.find((s) => s.set_id === setId);
  const member: Membership | undefined = detail.memberships.find((m) => m.set_id === chosen?.set_id);
  const saved = member?.note ?? "";
  const [note, setNote] = useState(saved);
  // Show the stored note of another episode, or a newly saved one; text the user is still
  // writing survives a change of set (and leaving the episode asks first).
  const shown = useRef({ saved, episodeId });
  useEffect(() => {
    const before = shown.current;
    if (before.episodeId !== episodeId || note.trim() === before.saved.trim()) setNote(saved);
    shown.current = { saved, episodeId };
  }, [saved, episodeId]); // `note` is read here, not followed
  useLeaveGuard(note.trim() !== saved.trim() ? `Your note on ${episodeId}` : null);

  const choose = (id: string) => {
    setSetId(id);
    if (id) localStorage.setItem(SET_KEY, id);
    else localStorage.removeItem(SET_KEY);
  };

  const createSet = async (name: string) => {
    try {
      const created = await call(api.POST("/api/sets", { body: { name, kind: "failure" } }));
      choose(created.set_id);
      setNewName("");
      void invalidate(["sets"]);
      toast(`Created set ${created.name}: keys 1-5 and F file into it`);
    } catch (e) {
      toast(`Could not create set ${name}: ${(e as Error).message}`, "error");
    }
  };

  // Writes run one after another, each on top of the member the last one saved: keys
  // pressed faster than the episode reloads (F then 4) add up instead of undoing each other.
  const queue = useRef<Promise<void>>(Promise.resolve());
  const lastSaved = useRef<{ key: string; put: Put } | null>(null);

  const putMember = (setIdTo: string, name: string, changes: Partial<Put>, base: Put, done: string) => {
    const key = `${setIdTo}/${episodeId}`;
    queue.current = queue.current.then(async () => {
      const body = { ...(lastSaved.current?.key === key ? lastSaved.current.put : base), ...changes };
      try {
        const m = await call(
          api.PUT("/api/sets/{set_id}/members/{episode_id}", {
            params: { path: { set_id: setIdTo, episode_id: episodeId } },
            body: { ...body, added_by: "web" },
          }),
        );
        lastSaved.current = { key, put: { failure_category: (m.failure_category as FailureCategory | null) ?? null, failing_step: m.failing_step ?? null, note: m.note ?? null } };
        toast(`${done} in ${name}: ${m.failure_category ?? "no category"}, failing step ${m.failing_step ?? "—"}`);
      } catch (e) {
        toast(`Could not save ${episodeId} in ${name}: ${(e as Error).message}`, "error");
      }
      void invalidate(["episode", episodeId], ["sets"]);
    });
  };

  /** File the episode into the chosen set with `changes` over what it has there. */
  const file = (changes: Partial<Put>) => {
    if (!sets.data) {
      toast("The sets are still loading: press the key again in a moment.", "error");
      return;
    }
    if (!chosen) {
      toast("Choose a set first: keys 1-5 and F file the episode into the set chosen under Curation.", "error");
      // Shown, never focused: in a focused picker the next letter would choose a set by type-ahead.
      select.current?.scrollIntoView({ block: "nearest" });
      return;
    }
    const current: Put = {
      failure_category: (member?.failure_category as FailureCategory | null) ?? null,
      failing_step: member?.failing_step ?? null,
      note: null,
    };
    putMember(chosen.set_id, chosen.name ?? chosen.set_id, { note: note.trim() || null, ...changes }, current, "Saved");
  };

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (!isShortcut(e)) return;
      const n = Number(e.key);
      if (n >= 1 && n <= FAILURE_CATEGORIES.length) file({ failure_category: FAILURE_CATEGORIES[n - 1] });
      else if (e.key === "f" || e.key === "F") file({ failing_step: stepNo });
      else return;
      e.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  });

  const remove = async (m: Membership) => {
    try {
      await call(api.DELETE("/api/sets/{set_id}/members/{episode_id}", { params: { path: { set_id: m.set_id, episode_id: episodeId } } }));
      const back: Put = { failure_category: (m.failure_category as FailureCategory | null) ?? null, failing_step: m.failing_step ?? null, note: m.note ?? null };
      lastSaved.current = null;
      toast(`Removed ${episodeId} from ${m.set_name}`, "ok", { label: "Undo", run: () => putMember(m.set_id, m.set_name ?? m.set_id, back, back, "Restored") });
      void invalidate(["episode", episodeId], ["sets"]);
    } catch (e) {
      toast(`Could not remove ${episodeId} from ${m.set_name}: ${(e as Error).message}`, "error");
    }
  };

  return (
    <section className="curation" data-testid="curation" aria-labelledby="curation-title">
      <h3 id="curation-title">Curation</h3>
      <p className={`curation-target ${chosen || !sets.data ? "" : "unset"}`} data-testid="curation-target">
        {chosen ? (
          <>
            Filing into <strong>{chosen.name}</strong> <span className="muted">
              ({chosen.kind}, {count(chosen.members, "member")})
            </span>
          </>
        ) : sets.data && setId ? (
          // remembered from an earlier visit, but the set is gone (deleted here or elsewhere)
          <span data-testid="remembered-set-gone">The set you last filed into no longer exists: pick or create one below; keys 1-5 and F file into it.</span>
        ) : sets.data ? (
          <>No set chosen: pick or create one below; keys 1-5 and F file into it.</>
        ) : (
          <>Loading sets…</>
        )}
      </p>
      <ul className="memberships" data-testid="memberships">
        {detail.memberships.map((m) => (
          <li key={m.set_id}>
            <Link to={`/sets/${enc(m.set_id)}`}>{m.set_name}</Link> <span className="category">{m.failure_category ?? "no category"}</span>
            {m.failing_step != null && <span> · failing step {m.failing_step}</span>}
            {m.note && <div className="note">{m.note}</div>}
            <button type="button" className="link" onClick={() => remove(m)} aria-label={`remove from ${m.set_name}`}>
              remove
            </button>
          </li>
        ))}
        {detail.memberships.length === 0 && <li className="muted">In no set yet.</li>}
      </ul>
      <label className="field">
        Set to file into
        <select ref={select} value={chosen?.set_id ?? ""} onChange={(e) => choose(e.target.value)} data-testid="set-select">
          <option value="">choose a set…</option>
          {sets.data?.map((s) => (
            <option key={s.set_id} value={s.set_id}>
              {s.name} ({s.kind}, {s.members})
            </option>
          ))}
        </select>
      </label>
      <form
        className="new-set"
        onSubmit={(e) => {
          e.preventDefault();
          if (newName.trim()) void createSet(newName.trim());
        }}
      >
        <input aria-label="New failure set name" placeholder="new failure set" value={newName} onChange={(e) => setNewName(e.target.value)} />
        <button type="submit" disabled={!newName.trim()}>
          Create
        </button>
      </form>
      <div className="categories" role="group" aria-label="failure category">
        {FAILURE_CATEGORIES.map((c, i) => (
          <button
            type="button"
            key={c}
            className={member?.failure_category === c ? "active" : ""}
            aria-pressed={member?.failure_category === c}
            onClick={() => file({ failure_category: c })}
            title={`key ${i + 1}`}
          >
            <kbd>{i + 1}</kbd> {c}
          </button>
        ))}
      </div>
      <button type="button" onClick={() => file({ failing_step: stepNo })}>
        <kbd>F</kbd> Mark step {stepNo} as failing
      </button>
      <label className="field">
        Note on this episode
        <textarea placeholder="what went wrong" value={note} onChange={(e) => setNote(e.target.value)} data-testid="note" />
      </label>
      <button type="button" onClick={() => file({})} disabled={note.trim() === saved.trim()}>
        Save note
      </button>
    </section>
  );
}
