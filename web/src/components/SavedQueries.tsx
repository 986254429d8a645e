// The team's saved SQL queries beside the console: each opens in the editor, shows its
// owner, and can be deleted by its owner (or an admin; the server decides). "Save as…"
// saves the editor's query under a name.
import { useState } from "react";
import { useQuery } from "@tanstack/react-query";
import { api, call } from "../api/client";
import { invalidate, queries } from "../api/queries";
import { toast } from "./Toasts";

export function SavedQueries({ current, onOpen }: { current: string; onOpen: (query: string) => void }) {
  const saved = useQuery(queries.savedQueries());
  const me = useQuery(queries.me());
  const [name, setName] = useState("");
  const save = async () => {
    try {
      const made = await call(api.POST("/api/sql/saved", { body: { name: name.trim(), query: current } }));
      toast(`Saved query ${made.name}`);
      setName("");
      void invalidate(["sql-saved"]);
    } catch (e) {
      toast(`Could not save the query: ${(e as Error).message}`, "error");
    }
  };
  const remove = async (id: string, label: string) => {
    try {
      await call(api.DELETE("/api/sql/saved/{query_id}", { params: { path: { query_id: id } } }));
      toast(`Deleted saved query ${label}`);
      void invalidate(["sql-saved"]);
    } catch (e) {
      toast(`Could not delete ${label}: ${(e as Error).message}`, "error");
    }
  };
  const mine = (owner: string | null | undefined) => !me.data?.sign_in || me.data.role === "admin" || owner === me.data.name;
  return (
    <section aria-labelledby="saved-queries-title">
      <h3 id="saved-queries-title">Saved queries</h3>
      <form
        className="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void save();
        }}
      >
        <input value={name} onChange={(e) => setName(e.target.value)} placeholder="name" aria-label="save the query as" required />
        <button type="submit" disabled={!current.trim()}>
          Save as
        </button>
      </form>
      <ul className="sql-saved" data-testid="sql-saved">
        {saved.data?.map((q) => (
          <li key={q.query_id}>
            <button type="button" className="link" title={q.query ?? ""} onClick={() => onOpen(q.query ?? "")}>
              {q.name}
            </button>{" "}
            <span className="muted">by {q.owner ?? "—"}</span>
            {mine(q.owner) && (
              <button type="button" className="link" onClick={() => void remove(q.query_id, q.name ?? q.query_id)} aria-label={`delete saved query ${q.name}`}>
                ×
              </button>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
