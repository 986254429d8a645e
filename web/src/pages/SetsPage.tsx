// /sets and /sets/<id>: the curated sets, and one set's members with their categories,
// failing steps and notes.
import { useState, type FormEvent } from "react";
import { useQuery } from "@tanstack/react-query";
import { api, call, FAILURE_CATEGORIES, type FailureCategory, type Member, type SetRow } from "../api/client";
import { invalidate, queries, queryClient } from "../api/queries";
import { ask } from "../components/Dialogs";
import { ListTable } from "../components/ListTable";
import { Options } from "../components/Options";
import { ActionError, Async } from "../components/Status";
import { mark } from "../components/TaskTree";
import { Time } from "../components/Time";
import { RoleNote, useAssignable, useMay } from "../components/Role";
import { SelectionBar } from "../components/SelectionBar";
import { NONE_TICKED, tick, type Ticked } from "../components/selection";
import { TickBox } from "../components/TickBox";
import { toast } from "../components/Toasts";
import { useAction, useTitle } from "../hooks";
import { Link, enc, navigate } from "../router";

const KINDS = ["failure", "regression", "sft", "eval"] as const;
type Kind = (typeof KINDS)[number];

export function SetsPage() {
  const may = useMay();
  const sets = useQuery(queries.sets());
  const action = useAction();
  useTitle("Sets");
  const create = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget);
    action.run(async () => {
      const created = await call(
        api.POST("/api/sets", { body: { name: String(form.get("name")), kind: String(form.get("kind")) as Kind, description: String(form.get("description") || "") || null } }),
      );
      void invalidate(["sets"]);
      navigate(`/sets/${enc(created.set_id)}`);
    });
  };
  return (
    <main className="page" data-testid="sets-page">
      <h2>Sets</h2>
      <Async state={sets} what="sets">
        {(list) => (
          <ListTable
            columns={["name", "kind", "members", "pinned tag", "description", "updated"]}
            items={list}
            row={(s) => (
              <tr key={s.set_id}>
                <td>
                  <Link to={`/sets/${enc(s.set_id)}`}>{s.name}</Link>
                </td>
                <td>{s.kind}</td>
                <td>{s.members}</td>
                <td>{s.pinned_tag ?? "—"}</td>
                <td>{s.description}</td>
                <td>
                  <Time value={s.updated_at} />
                </td>
              </tr>
            )}
            empty="No sets yet: create one below, or press 1-5 while replaying an episode."
          />
        )}
      </Async>
      {!may("curator") ? (
        <RoleNote need="curator" what="Making sets" />
      ) : (
      <form className="inline-form" onSubmit={create}>
        <input name="name" placeholder="new set name" aria-label="New set name" required />
        <select name="kind" defaultValue="failure" aria-label="New set kind">
          <Options values={KINDS} />
        </select>
        <input name="description" placeholder="description" aria-label="New set description" />
        <button type="submit">Create set</button>
      </form>
      )}
      <ActionError message={action.error} />
    </main>
  );
}

export function SetPage({ id }: { id: string }) {
  const may = useMay();
  const set = useQuery(queries.set(id));
  const members = useQuery(queries.members(id));
  const tags = useQuery(queries.health());
  const action = useAction();
  useTitle(set.data?.name ? `Set ${set.data.name}` : "Set");
  const assignable = useAssignable(set.data?.assigned_to);
  // ticked members, to file into another set together (shift-click ticks a range)
  const [ticked, setTicked] = useState<Ticked>(NONE_TICKED);
  const onTick = (episode: string, shift: boolean) =>
    setTicked((before) => tick((members.data ?? []).map((m) => m.episode_id), before, episode, shift));
  const update = (body: Partial<Pick<SetRow, "name" | "kind" | "description" | "pinned_tag" | "assigned_to">>) =>
    action.run(async () => {
      await call(api.PATCH("/api/sets/{set_id}", { params: { path: { set_id: id } }, body: body as never }));
      void invalidate(["sets"], ["episode"], ["audit"]); // the episodes' memberships name the set
    });
  const deleteSet = async () => {
    const name = set.data?.name ?? id;
    const members = set.data?.members ?? 0;
    const yes = await ask({
      title: `Delete set ${name}?`,
      body: `The set and its ${members} member${members === 1 ? "" : "s"} leave the app and the API; the episodes themselves stay, and lake versions from before still hold the set.`,
      confirm: "Delete",
      danger: true,
    });
    if (!yes) return;
    action.run(async () => {
      await call(api.DELETE("/api/sets/{set_id}", { params: { path: { set_id: id } } }));
      toast(`Deleted set ${name}`);
      navigate("/sets");
      // Gone: dropped rather than refetched; the list and the episodes' memberships refresh.
      queryClient.removeQueries({ queryKey: ["sets", id] });
      void invalidate(["sets"], ["episode"], ["audit"]);
    });
  };
  const remove = async (m: Member) => {
    const put = () =>
      call(
        api.PUT("/api/sets/{set_id}/members/{episode_id}", {
          params: { path: { set_id: id, episode_id: m.episode_id } },
          body: { failure_category: (m.failure_category as FailureCategory | null) ?? null, failing_step: m.failing_step ?? null, note: m.note ?? null, added_by: m.added_by ?? null },
        }),
      );
    const reload = () => invalidate(["sets"], ["episode", m.episode_id], ["audit"]);
    try {
      await call(api.DELETE("/api/sets/{set_id}/members/{episode_id}", { params: { path: { set_id: id, episode_id: m.episode_id } } }));
      reload();
      toast(`Removed ${m.episode_id}`, "ok", { label: "Undo", run: () => void put().then(reload, (e: Error) => toast(`Could not restore ${m.episode_id}: ${e.message}`, "error")) });
    } catch (e) {
      toast(`Could not remove ${m.episode_id}: ${(e as Error).message}`, "error");
    }
  };
  return (
    <main className="page" data-testid="set-page">
      <p>
        <Link to="/sets">← all sets</Link>
      </p>
      <Async state={set} what="set">
        {(s) => (
          <div className="set-head">
            <h2>{s.name}</h2>
            <form
              className="inline-form"
              key={s.updated_at}
              onSubmit={(e) => {
                e.preventDefault();
                const f = new FormData(e.currentTarget);
                void update({
                  name: String(f.get("name")),
                  kind: String(f.get("kind")) as Kind,
                  description: String(f.get("description") || "") || null,
                  pinned_tag: String(f.get("pinned_tag") || "") || null,
                  assigned_to: String(f.get("assigned_to") || "") || null,
                });
              }}
            >
              <input name="name" defaultValue={s.name ?? ""} aria-label="name" />
              <select name="kind" defaultValue={s.kind ?? "failure"} aria-label="kind">
                <Options values={KINDS} />
              </select>
              <input name="description" defaultValue={s.description ?? ""} placeholder="description" aria-label="description" />
              <select name="pinned_tag" defaultValue={s.pinned_tag ?? ""} aria-label="pinned tag">
                <option value="">not pinned</option>
                <Options values={tags.data?.tags} />
              </select>
              <select name="assigned_to" defaultValue={s.assigned_to ?? ""} aria-label="assigned to">
                <option value="">nobody assigned</option>
                <Options values={assignable} />
              </select>
              {may("curator") && <button type="submit">Save</button>}
              {may("admin") && (
                <button type="button" className="danger" onClick={() => void deleteSet()}>
                  Delete set
                </button>
              )}
            </form>
            <p className="muted">
              {s.members} members · <Link to={`/?set_id=${enc(id)}`}>browse them</Link> · set id <span className="mono">{s.set_id}</span>
              {s.created_by && ` · made by ${s.created_by}`}
            </p>
          </div>
        )}
      </Async>
      <ActionError message={action.error} />
      {may("curator") && ticked.ids.size > 0 && (
        <SelectionBar episodes={[...ticked.ids]} hidden={0} onClear={() => setTicked(NONE_TICKED)} />
      )}
      <Async state={members} what="members">
        {(list) => (
          <ListTable
            testid="members"
            columns={[...(may("curator") ? [""] : []), "episode", "task", "outcome", "category", "failing step", "note", "added", "review", ""]}
            items={list}
            row={(m) => (
              <tr key={m.episode_id}>
                {may("curator") && (
                  <td>
                    <TickBox episode={m.episode_id} ticked={ticked} onTick={onTick} />
                  </td>
                )}
                <td>
                  <Link to={`/episodes/${enc(m.episode_id)}/steps/${m.failing_step ?? 0}`}>{m.episode_id}</Link>
                </td>
                <td>{m.task_name}</td>
                <td>{mark(m.success)}</td>
                <td>{m.failure_category ?? "—"}</td>
                <td>{m.failing_step ?? "—"}</td>
                <td className="note">{m.note}</td>
                <td>
                  <Time value={m.added_at} /> {m.added_by && `by ${m.added_by}`}
                </td>
                <td>
                  <ReviewCell setId={id} member={m} canReview={may("curator")} />
                </td>
                <td>
                  {may("curator") && (
                    <button type="button" className="link" onClick={() => remove(m)} aria-label={`remove ${m.episode_id}`}>
                      remove
                    </button>
                  )}
                </td>
              </tr>
            )}
          />
        )}
      </Async>
      <SetChanges setId={id} />
    </main>
  );
}

/** The set's last changes (its own and its members'), from the audit log: who did what, when. */
function SetChanges({ setId }: { setId: string }) {
  const changes = useQuery(queries.audit(setId));
  return (
    <section aria-labelledby="set-changes" className="set-changes">
      <h3 id="set-changes">Changes</h3>
      <Async state={changes} what="changes">
        {(list) => (
          <ListTable
            testid="set-changes"
            columns={["when", "who", "what", "episode"]}
            items={list}
            row={(c) => (
              <tr key={c.audit_id}>
                <td>
                  <Time value={c.changed_at} />
                </td>
                <td>{c.who ?? "—"}</td>
                <td>{c.action}</td>
                <td className="mono">{c.episode_id ?? ""}</td>
              </tr>
            )}
          />
        )}
      </Async>
    </section>
  );
}

/** A member's review: its state, each reviewer's label side by side, and the signed-in
 * person's own review (a category; the failing step is the member's). */
function ReviewCell({ setId, member, canReview }: { setId: string; member: Member; canReview: boolean }) {
  const reviews = member.reviews ?? [];
  const save = async (category: string) => {
    try {
      await call(
        api.PUT("/api/sets/{set_id}/members/{episode_id}/review", {
          params: { path: { set_id: setId, episode_id: member.episode_id } },
          body: { failure_category: (category || null) as FailureCategory | null, failing_step: member.failing_step ?? null },
        }),
      );
      toast(`Reviewed ${member.episode_id}: ${category || "no category"}`);
    } catch (e) {
      toast(`Could not review ${member.episode_id}: ${(e as Error).message}`, "error");
    }
    void invalidate(["sets", setId], ["audit"]);
  };
  const state = member.review_state ?? "to review";
  return (
    <div className="review-cell" data-review-state={state}>
      <span className={`review-state review-${state.replace(" ", "-")}`}>{state}</span>
      {reviews.map((r) => (
        <span key={r.reviewer} className="review-label">
          {r.reviewer}: {r.failure_category ?? "—"}
          {r.failing_step != null && ` @${r.failing_step}`}
        </span>
      ))}
      {canReview && (
        <select value="" onChange={(e) => void save(e.target.value)} aria-label={`your review of ${member.episode_id}`}>
          <option value="" disabled>
            my review…
          </option>
          <Options values={FAILURE_CATEGORIES} />
        </select>
      )}
    </div>
  );
}
