// Saved views: named filters everyone on the lake shares (GET/POST/PATCH/DELETE /api/views).
// Opening one puts its filters in the address bar with `view=<id>`, so the page is a link;
// `/views/<id>` is the view's own link, which opens its filters as they are saved now. A view
// whose filters were changed after it was opened says "modified", and offers to update it
// (its filters replaced by the address bar's), to save the change as another view, or to
// go back to the view as saved. A view is also a curation queue (the replay's ] and [ walk
// its episodes), so a curator can assign it to a person (PUT/DELETE
// /api/views/{id}/assignee); the list names each view's assignee, the signed-in person's
// queues come first, and "assigned to me" leaves only those (`mine=1` in the address, so a
// reload or a shared link keeps it). Every change sends the version of the view it was made
// from (If-Match): a teammate's newer version of an open, modified view shows beside the
// address bar's filters (take theirs / keep mine) instead of being overwritten unseen.
import { useEffect, useState, type FormEvent } from "react";
import { useQuery } from "@tanstack/react-query";
import { api, call, ifMatch, isStale, type Schemas } from "../api/client";
import { invalidate, queries } from "../api/queries";
import { useAction, useAddressValue } from "../hooks";
import { navigate, useLocation, withQuery } from "../router";
import { ask } from "./Dialogs";
import { filtersFromQuery, queryFromFilters, sameFilters } from "./filters";
import { ChangedMeanwhile } from "./Merge";
import { useAssignable, useMay } from "./Role";
import { ActionError } from "./Status";
import { toast } from "./Toasts";

export type SavedView = Schemas["SavedView"];

/** The address that shows `view` on `path`: its filters and its id. */
/** The address of `view` opened; "assigned to me" (`mine`) stays as it was in `keep`. */
export function viewHref(path: string, view: SavedView, keep?: URLSearchParams): string {
  const q = queryFromFilters(view.filters as Record<string, unknown>);
  q.set("view", view.view_id);
  if (keep?.get(MINE) === "1") q.set(MINE, "1");
  return withQuery(path, q);
}

/** The address's flag for "assigned to me", so a curator's link or reload keeps their queues. */
const MINE = "mine";

/** The views assigned to `me` (their queues, shown first) and the others; nobody signed
 * in (a server without users) has no queues. */
function splitByAssignee(views: SavedView[], me: string | null | undefined): { mine: SavedView[]; others: SavedView[] } {
  const mine = me ? views.filter((v) => v.assigned_to === me) : [];
  return { mine, others: views.filter((v) => !mine.includes(v)) };
}

function ViewOption({ view, me }: { view: SavedView; me: string | null | undefined }) {
  const to = view.assigned_to && view.assigned_to !== me ? ` (assigned to ${view.assigned_to})` : "";
  return <option value={view.view_id}>{view.name + to}</option>;
}

/** Who the open view is assigned to; a curator picks another person, or nobody. */
function ViewAssignee({ view }: { view: SavedView }) {
  const may = useMay();
  const assign = useAction();
  const names = useAssignable(view.assigned_to);
  if (!may("curator") || names.length === 0) {
    // a viewer reads who has it; a lake without users has nobody to offer
    return view.assigned_to ? <span className="muted">assigned to {view.assigned_to}</span> : null;
  }
  const change = (person: string) =>
    assign.run(async () => {
      const view_id = view.view_id;
      try {
        const updated = await call(
          person
            ? api.PUT("/api/views/{view_id}/assignee", { params: { path: { view_id }, header: ifMatch(view.version ?? 0) }, body: { assigned_to: person } })
            : api.DELETE("/api/views/{view_id}/assignee", { params: { path: { view_id }, header: ifMatch(view.version ?? 0) } }),
        );
        toast(updated.assigned_to ? `Assigned “${updated.name}” to ${updated.assigned_to}.` : `“${updated.name}” is assigned to nobody now.`);
      } finally {
        await invalidate(["views"], ["audit"]); // a refusal (a teammate's newer version) shows theirs
      }
    });
  return (
    <>
      <select aria-label="view assigned to" title="who works through this view's episodes, as their queue" value={view.assigned_to ?? ""} disabled={assign.busy} onChange={(e) => change(e.target.value)}>
        <option value="">nobody assigned</option>
        {names.map((n) => (
          <option key={n} value={n}>
            for {n}
          </option>
        ))}
      </select>
      <ActionError message={assign.error} testid="view-assign-error" />
    </>
  );
}

export function SavedViews() {
  const { path, query } = useLocation();
  const views = useQuery(queries.views());
  const me = useQuery(queries.me()).data?.name;
  const [onlyMine, setOnlyMine] = useAddressValue(query.get(MINE) === "1", query.get(MINE) ?? "");
  const showOnlyMine = (on: boolean) => {
    setOnlyMine(on);
    const q = new URLSearchParams(query);
    if (on) q.set(MINE, "1");
    else q.delete(MINE);
    navigate(withQuery(path, q), { replace: true });
  };
  const [naming, setNaming] = useState(false);
  const save = useAction();
  const may = useMay();
  const current = views.data?.find((v) => v.view_id === query.get("view"));
  // The open view as it was opened (or last merged): the address bar's filters are an edit
  // of these, so a teammate's newer filters are told apart from the user's own changes.
  const [opened, setOpened] = useState<{ id: string; filters: Record<string, unknown> } | null>(null);
  const base = opened && current && opened.id === current.view_id ? opened.filters : (current?.filters as Record<string, unknown> | undefined);
  useEffect(() => {
    if (current && opened?.id !== current.view_id) setOpened({ id: current.view_id, filters: current.filters as Record<string, unknown> });
  }, [current?.view_id]); // eslint-style: follows the open view's id only
  const split = splitByAssignee(views.data ?? [], me);
  const mine = split.mine;
  // "assigned to me" leaves out the others, but not the view that is open
  const others = onlyMine ? split.others.filter((v) => v === current) : split.others;
  // the address bar's filter, as the API takes it (the flags it has always named)
  const shown = { unjudged: false, zero_step_reward: false, ...filtersFromQuery(query) };
  const modified = current !== undefined && !sameFilters(current.filters as Record<string, unknown>, shown);
  const saved = current?.filters as Record<string, unknown> | undefined;
  // their filters differ from what the user's are an edit of, and from the user's own
  const clash = current !== undefined && base !== undefined && saved !== undefined && !sameFilters(saved, base) && !sameFilters(saved, shown);
  const untouched = base !== undefined && sameFilters(base, shown);
  // a teammate's newer filters of the open view: the address follows them unless the user changed the filters
  useEffect(() => {
    if (!current || !saved || !base || sameFilters(saved, base)) return;
    if (untouched) navigate(viewHref(path, current, query), { replace: true });
    if (untouched || sameFilters(saved, shown)) setOpened({ id: current.view_id, filters: saved });
  }, [current?.version]); // the address is read here, not followed
  const takeTheirs = (view: SavedView) => {
    setOpened({ id: view.view_id, filters: view.filters as Record<string, unknown> });
    navigate(viewHref(path, view, query), { replace: true });
  };
  const keepMine = (view: SavedView) => setOpened({ id: view.view_id, filters: view.filters as Record<string, unknown> });
  const submit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const name = String(new FormData(e.currentTarget).get("name") ?? "").trim();
    save.run(async () => {
      const view = await call(api.POST("/api/views", { body: { name, filters: shown } }));
      setNaming(false);
      void invalidate(["views"]);
      navigate(viewHref(path, view, query), { replace: true });
      toast(`Saved the view “${view.name}”.`);
    });
  };
  const update = (view: SavedView) =>
    save.run(async () => {
      try {
        const updated = await call(
          api.PATCH("/api/views/{view_id}", { params: { path: { view_id: view.view_id }, header: ifMatch(view.version ?? 0) }, body: { filters: shown } }),
        );
        setOpened({ id: updated.view_id, filters: updated.filters as Record<string, unknown> });
        toast(`Updated the view “${updated.name}”.`);
      } catch (e) {
        if (!isStale(e)) throw e;
        toast(`Not saved: someone saved “${view.name}” meanwhile. Their filters are shown beside yours; take theirs or keep yours, then update.`, "error");
      } finally {
        await invalidate(["views"]);
      }
    });
  const remove = async (view: SavedView) => {
    const yes = await ask({ title: `Delete the view “${view.name}”?`, body: "Everyone on this lake loses it. The episodes stay as they are.", confirm: "Delete view", danger: true });
    if (!yes) return;
    try {
      await call(api.DELETE("/api/views/{view_id}", { params: { path: { view_id: view.view_id }, header: ifMatch(view.version ?? 0) } }));
      const q = new URLSearchParams(query);
      q.delete("view");
      navigate(withQuery(path, q), { replace: true });
      void invalidate(["views"]);
      toast(`Deleted the view “${view.name}”.`);
    } catch (err) {
      toast((err as Error).message, "error");
      void invalidate(["views"]);
    }
  };
  return (
    <div className="saved-views" data-testid="saved-views">
      <div className="filter-row">
        <select
          aria-label="saved view"
          value={current?.view_id ?? ""}
          onChange={(e) => {
            const view = views.data?.find((v) => v.view_id === e.target.value);
            const q = new URLSearchParams(query.get(MINE) === "1" ? { [MINE]: "1" } : {});
            navigate(view ? viewHref(path, view, query) : withQuery(path, q));
          }}
        >
          <option value="">
            {views.error ? "saved views did not load" : !views.data?.length ? "no saved views yet" : onlyMine && !mine.length ? "no views assigned to you" : "saved views…"}
          </option>
          {mine.length > 0 ? (
            <>
              <optgroup label="your queues">
                {mine.map((v) => (
                  <ViewOption key={v.view_id} view={v} me={me} />
                ))}
              </optgroup>
              {others.length > 0 && (
                <optgroup label="other views">
                  {others.map((v) => (
                    <ViewOption key={v.view_id} view={v} me={me} />
                  ))}
                </optgroup>
              )}
            </>
          ) : (
            others.map((v) => <ViewOption key={v.view_id} view={v} me={me} />)
          )}
        </select>
        {me && (
          <label title="only the views assigned to you: your curation queues">
            <input type="checkbox" checked={onlyMine} onChange={(e) => showOnlyMine(e.target.checked)} /> assigned to me ({mine.length})
          </label>
        )}
        {current ? (
          <>
            <ViewAssignee view={current} />
            <a href={`/views/${current.view_id}`} title="this view's link, to share" className="link">
              link
            </a>
            {may("curator") && (
              <button type="button" className="link danger" onClick={() => void remove(current)}>
                delete view
              </button>
            )}
          </>
        ) : may("curator") ? (
          <button type="button" className="link" onClick={() => setNaming(!naming)} aria-expanded={naming}>
            save view…
          </button>
        ) : (
          <span className="muted" data-testid="save-view-role-note" title="a curator or an admin can save views">
            saving views needs the curator role
          </span>
        )}
      </div>
      {modified && (
        <div className="filter-row view-changed">
          <span className="view-modified" data-testid="view-modified" title={`the filters differ from “${current.name}” as saved`}>
            modified
          </span>
          {may("curator") && (
            <>
              <button
                type="button"
                onClick={() => update(current)}
                disabled={save.busy || clash}
                title={clash ? "take their filters or keep yours first" : `replace “${current.name}”'s filters with these, for everyone`}
              >
                Update view
              </button>
              <button type="button" onClick={() => setNaming(!naming)} aria-expanded={naming}>
                Save as…
              </button>
            </>
          )}
          <button type="button" className="link" onClick={() => navigate(viewHref(path, current, query))}>
            revert
          </button>
        </div>
      )}
      {clash && current && saved && base && <ViewConflict view={current} theirs={saved} mine={shown} onTakeTheirs={() => takeTheirs(current)} onKeepMine={() => keepMine(current)} />}
      {naming && may("curator") && (!current || modified) && (
        <form onSubmit={submit} className="filter-row">
          <label className="field">
            view name
            <input name="name" required maxLength={200} autoFocus />
          </label>
          <button type="submit" disabled={save.busy}>
            Save
          </button>
          <button type="button" onClick={() => setNaming(false)}>
            Cancel
          </button>
        </form>
      )}
      <ActionError message={save.error} testid="view-error" />
    </div>
  );
}

/** A teammate saved the open view with other filters while the user changed them: each
 * filter that differs, theirs beside the user's, and the choice. */
function ViewConflict({ view, theirs, mine, onTakeTheirs, onKeepMine }: { view: SavedView; theirs: Record<string, unknown>; mine: Record<string, unknown>; onTakeTheirs: () => void; onKeepMine: () => void }) {
  const a = queryFromFilters(theirs);
  const b = queryFromFilters(mine);
  const fields = [...new Set([...a.keys(), ...b.keys()])].filter((k) => a.get(k) !== b.get(k)).sort();
  return (
    <div className="view-conflict" data-testid="view-conflict">
      <ChangedMeanwhile stored={view} count={fields.length} what="view" />
      <table className="theirs-table">
        <thead>
          <tr>
            <th scope="col">filter</th>
            <th scope="col">theirs</th>
            <th scope="col">yours</th>
          </tr>
        </thead>
        <tbody>
          {fields.map((k) => (
            <tr key={k}>
              <th scope="row">{k}</th>
              <td data-testid={`theirs-${k}`}>{a.get(k) ?? "—"}</td>
              <td>{b.get(k) ?? "—"}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <button type="button" onClick={onTakeTheirs}>
        take theirs
      </button>{" "}
      <button type="button" onClick={onKeepMine}>
        keep mine
      </button>
    </div>
  );
}

/** `/views/<id>`: the view's filters, as saved now, on the episodes page. */
export function ViewPage({ id }: { id: string }) {
  const view = useQuery({ ...queries.view(id), staleTime: 0 }); // the view as saved now
  useEffect(() => {
    if (view.data && !view.isFetching) navigate(viewHref("/", view.data), { replace: true });
  }, [view.data, view.isFetching]);
  return (
    <main className="page" data-testid="view-page">
      {view.error ? (
        <div className="error" role="alert">
          Could not open the saved view {id}: {view.error.message}
        </div>
      ) : (
        <p className="loading" role="status">
          Opening the saved view…
        </p>
      )}
    </main>
  );
}
