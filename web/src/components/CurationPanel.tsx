// Curation in place: keys 1-5 put the episode in the chosen set with that failure
// category and the current step as the failing step; F marks the current step as the
// failing one; the note is saved with the member. Each change is one API call, durable in
// the lake when it returns.
import { useEffect, useState } from "react";
import { api, call, FAILURE_CATEGORIES, type EpisodeDetail, type FailureCategory, type Membership } from "../api/client";
import { useApi, isTyping } from "../hooks";
import { Link, enc } from "../router";

const SET_KEY = "elake.curation.set";
const DEFAULT_SET = "failures";

export function CurationPanel({ detail, stepNo, onChanged }: { detail: EpisodeDetail; stepNo: number; onChanged: () => void }) {
  const sets = useApi(() => call(api.GET("/api/sets")), []);
  const [setId, setSetId] = useState(() => localStorage.getItem(SET_KEY) ?? "");
  const [message, setMessage] = useState<string>();
  const [error, setError] = useState<string>();
  const [newName, setNewName] = useState("");
  const episodeId = detail.episode.episode_id;
  const chosen = sets.data?.find((s) => s.set_id === setId) ?? sets.data?.find((s) => s.kind === "failure");
  const member: Membership | undefined = detail.memberships.find((m) => m.set_id === chosen?.set_id);
  const [note, setNote] = useState(member?.note ?? "");
  useEffect(() => setNote(member?.note ?? ""), [member?.note, episodeId, chosen?.set_id]);

  const choose = (id: string) => {
    setSetId(id);
    localStorage.setItem(SET_KEY, id);
  };

  const createSet = async (name: string) => {
    const created = await call(api.POST("/api/sets", { body: { name, kind: "failure" } }));
    choose(created.set_id);
    sets.reload();
    return created.set_id;
  };

  const put = async (category: FailureCategory | null, failingStep: number | null, text: string) => {
    try {
      const target = chosen?.set_id ?? (await createSet(DEFAULT_SET));
      const saved = await call(
        api.PUT("/api/sets/{set_id}/members/{episode_id}", {
          params: { path: { set_id: target, episode_id: episodeId } },
          body: { failure_category: category, failing_step: failingStep, note: text || null, added_by: "web" },
        }),
      );
      setError(undefined);
      setMessage(`Saved in ${chosen?.name ?? DEFAULT_SET}: ${saved.failure_category ?? "no category"}, failing step ${saved.failing_step ?? "—"}`);
      sets.reload();
      onChanged();
    } catch (e) {
      setError((e as Error).message);
    }
  };

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (isTyping(e) || e.ctrlKey || e.metaKey || e.altKey) return;
      const n = Number(e.key);
      if (n >= 1 && n <= FAILURE_CATEGORIES.length) {
        e.preventDefault();
        void put(FAILURE_CATEGORIES[n - 1], stepNo, note);
      } else if (e.key === "f" || e.key === "F") {
        e.preventDefault();
        void put((member?.failure_category as FailureCategory | null) ?? null, stepNo, note);
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  });

  const remove = async (m: Membership) => {
    try {
      await call(api.DELETE("/api/sets/{set_id}/members/{episode_id}", { params: { path: { set_id: m.set_id, episode_id: episodeId } } }));
      setMessage(`Removed from ${m.set_name}`);
      sets.reload();
      onChanged();
    } catch (e) {
      setError((e as Error).message);
    }
  };

  return (
    <div className="curation" data-testid="curation">
      <h3>Curation</h3>
      <ul className="memberships" data-testid="memberships">
        {detail.memberships.map((m) => (
          <li key={m.set_id}>
            <Link to={`/sets/${enc(m.set_id)}`}>{m.set_name}</Link> <span className="category">{m.failure_category ?? "—"}</span>
            {m.failing_step != null && <span> · failing step {m.failing_step}</span>}
            {m.note && <div className="note">{m.note}</div>}
            <button type="button" className="link" onClick={() => remove(m)}>
              remove
            </button>
          </li>
        ))}
        {detail.memberships.length === 0 && <li className="muted">In no set yet.</li>}
      </ul>
      <label>
        Set{" "}
        <select value={chosen?.set_id ?? ""} onChange={(e) => choose(e.target.value)} data-testid="set-select">
          {!chosen && <option value="">(new set “{DEFAULT_SET}”)</option>}
          {sets.data?.map((s) => (
            <option key={s.set_id} value={s.set_id}>
              {s.name} ({s.kind}, {s.members})
            </option>
          ))}
        </select>
      </label>
      <div className="new-set">
        <input placeholder="new failure set" value={newName} onChange={(e) => setNewName(e.target.value)} />
        <button
          type="button"
          disabled={!newName.trim()}
          onClick={() => createSet(newName.trim()).then(() => setNewName(""), (e: Error) => setError(e.message))}
        >
          Create
        </button>
      </div>
      <div className="categories">
        {FAILURE_CATEGORIES.map((c, i) => (
          <button
            type="button"
            key={c}
            className={member?.failure_category === c ? "active" : ""}
            onClick={() => put(c, stepNo, note)}
            title={`key ${i + 1}`}
          >
            <kbd>{i + 1}</kbd> {c}
          </button>
        ))}
      </div>
      <button type="button" onClick={() => put((member?.failure_category as FailureCategory | null) ?? null, stepNo, note)}>
        <kbd>F</kbd> Mark step {stepNo} as failing
      </button>
      <textarea placeholder="note: what went wrong" value={note} onChange={(e) => setNote(e.target.value)} data-testid="note" />
      <button
        type="button"
        onClick={() => put((member?.failure_category as FailureCategory | null) ?? null, member?.failing_step ?? stepNo, note)}
      >
        Save note
      </button>
      {message && (
        <div className="ok" role="status" data-testid="curation-message">
          {message}
        </div>
      )}
      {error && <div className="error">{error}</div>}
    </div>
  );
}
