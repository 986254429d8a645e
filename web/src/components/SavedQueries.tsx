// The team's saved SQL queries beside the console: each opens in the editor and shows its
// owner; "Save as…" saves the editor's query under a name (a curator's), and a query opened
// from the list can be saved again with the editor's text, or deleted, by its owner (or an
// admin; the server decides). Saving sends the version the query was opened at: if a
// teammate saved it meanwhile, their text shows beside the editor ("take theirs" puts it in
// the editor, "keep mine" saves over it knowingly), never overwritten unseen.
import { useEffect, useState } from "react";
import { useQuery } from "@tanstack/react-query";
import { api, call, ifMatch, isStale, type SavedQuery } from "../api/client";
import { invalidate, queries } from "../api/queries";
import { conflicts } from "./merge";
import { ChangedMeanwhile } from "./Merge";
import { RoleNote, useMay } from "./Role";
import { toast } from "./Toasts";

/** The saved query open in the editor: its id, and its text and version when opened (or last
 * merged), which the editor's text is an edit of. */
interface Opened {
  id: string;
  text: string;
  version: number;
}

export function SavedQueries({ current, onOpen }: { current: string; onOpen: (query: string) => void }) {
  const saved = useQuery(queries.savedQueries());
  const me = useQuery(queries.me());
  const may = useMay();
  const [name, setName] = useState("");
  const [opened, setOpened] = useState<Opened | null>(null);
  const stored = saved.data?.find((q) => q.query_id === opened?.id);
  const edited = opened !== null && current !== opened.text;
  // a teammate's newer text of the open query: the editor follows it while nothing is typed
  useEffect(() => {
    if (!opened || !stored || stored.version === opened.version) return;
    if (!edited) {
      onOpen(stored.query ?? "");
      setOpened({ id: stored.query_id, text: stored.query ?? "", version: stored.version ?? 0 });
    }
  }, [stored?.version]); // the editor's text is read here, not followed
  const clash = opened && stored ? conflicts({ query: { mine: current, from: opened.text } }, { query: stored.query }).length > 0 : false;
  const open = (q: SavedQuery) => {
    onOpen(q.query ?? "");
    setOpened({ id: q.query_id, text: q.query ?? "", version: q.version ?? 0 });
  };
  const saveAs = async () => {
    try {
      const made = await call(api.POST("/api/sql/saved", { body: { name: name.trim(), query: current } }));
      toast(`Saved query ${made.name}`);
      setName("");
      setOpened({ id: made.query_id, text: made.query ?? "", version: made.version ?? 0 });
      void invalidate(["sql-saved"]);
    } catch (e) {
      toast(`Could not save the query: ${(e as Error).message}`, "error");
    }
  };
  const saveChanges = async (q: SavedQuery) => {
    try {
      const updated = await call(
        api.PATCH("/api/sql/saved/{query_id}", { params: { path: { query_id: q.query_id }, header: ifMatch(q.version ?? 0) }, body: { query: current } }),
      );
      setOpened({ id: updated.query_id, text: updated.query ?? "", version: updated.version ?? 0 });
      toast(`Saved the changes to ${updated.name}`);
    } catch (e) {
      if (isStale(e)) toast(`Not saved: someone saved ${q.name} meanwhile. Their text is shown beside yours; take theirs or keep yours, then save.`, "error");
      else toast(`Could not save ${q.name}: ${(e as Error).message}`, "error");
    }
    void invalidate(["sql-saved"]);
  };
  const remove = async (q: SavedQuery) => {
    const label = q.name ?? q.query_id;
    try {
      await call(api.DELETE("/api/sql/saved/{query_id}", { params: { path: { query_id: q.query_id }, header: ifMatch(q.version ?? 0) } }));
      toast(`Deleted saved query ${label}`);
      if (opened?.id === q.query_id) setOpened(null);
      void invalidate(["sql-saved"]);
    } catch (e) {
      toast(`Could not delete ${label}: ${(e as Error).message}`, "error");
      void invalidate(["sql-saved"]);
    }
  };
  const mine = (owner: string | null | undefined) => !me.data?.sign_in || me.data.role === "admin" || owner === me.data.name;
  return (
    <section aria-labelledby="saved-queries-title">
      <h3 id="saved-queries-title">Saved queries</h3>
      {may("curator") ? (
        <form
          className="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            void saveAs();
          }}
        >
          <input value={name} onChange={(e) => setName(e.target.value)} placeholder="name" aria-label="save the query as" required />
          <button type="submit" disabled={!current.trim()}>
            Save as
          </button>
        </form>
      ) : (
        <RoleNote need="curator" what="Saving queries" testid="saved-queries-role-note" />
      )}
      {stored && opened && (
        <div className="saved-open" data-testid="saved-open">
          <p className="muted">
            Open: <strong>{stored.name}</strong> (version {stored.version}){edited ? ", changed in the editor" : ""}
          </p>
          {clash && (
            <>
              <ChangedMeanwhile stored={stored} count={1} what="saved query" />
              <div className="theirs" role="group" aria-label="newer query text" data-testid="theirs-query">
                <span className="muted">theirs:</span>
                <pre className="mono theirs-value">{stored.query}</pre>
                <button
                  type="button"
                  className="link"
                  onClick={() => {
                    onOpen(stored.query ?? "");
                    setOpened({ id: stored.query_id, text: stored.query ?? "", version: stored.version ?? 0 });
                  }}
                >
                  take theirs
                </button>{" "}
                <button type="button" className="link" onClick={() => setOpened({ ...opened, text: stored.query ?? "", version: stored.version ?? 0 })}>
                  keep mine
                </button>
              </div>
            </>
          )}
          {mine(stored.owner) && may("curator") && (
            <button
              type="button"
              onClick={() => void saveChanges(stored)}
              disabled={!edited || clash || !current.trim()}
              title={clash ? "take theirs or keep yours first" : !edited ? "the editor holds the query as saved" : undefined}
            >
              Save changes to {stored.name}
            </button>
          )}
        </div>
      )}
      <ul className="sql-saved" data-testid="sql-saved">
        {saved.data?.map((q) => (
          <li key={q.query_id}>
            <button type="button" className="link" title={q.query ?? ""} onClick={() => open(q)}>
              {q.name}
            </button>{" "}
            <span className="muted">by {q.owner ?? "—"}</span>
            {mine(q.owner) && may("curator") && (
              <button type="button" className="link" onClick={() => void remove(q)} aria-label={`delete saved query ${q.name}`}>
                ×
              </button>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
