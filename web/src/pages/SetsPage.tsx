// /sets and /sets/<id>: the curated sets, and one set's members with their categories,
// failing steps and notes.
import { useState, type FormEvent } from "react";
import { useQuery } from "@tanstack/react-query";
import { api, call, FAILURE_CATEGORIES, ifMatch, isStale, type AuditEntry, type FailureCategory, type Member, type SetRow } from "../api/client";
import { invalidate, queries, queryClient } from "../api/queries";
import { ask } from "../components/Dialogs";
import { ListTable } from "../components/ListTable";
import { fieldChanges } from "../components/auditDiff";
import { ChangedMeanwhile, Theirs, useMerge } from "../components/Merge";
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
import { Link, enc, navigate, useLeaveGuard } from "../router";

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
  // The form's fields keep what the user typed while the set as stored arrives (a teammate's
  // save, live); a save sends only the fields changed here, from the version shown.
  const merge = useMerge(set.data, id);
  useLeaveGuard(merge.dirty ? `Your changes to the set ${set.data?.name ?? id}` : null);
  const field = (name: keyof SetRow) => String(merge.value(name) ?? "");
  const [stale, setStale] = useState<string | null>(null);
  const update = () =>
    action.run(async () => {
      const body = merge.changes() as Partial<Pick<SetRow, "name" | "kind" | "description" | "pinned_tag" | "assigned_to">>;
      setStale(null);
      try {
        const saved = await call(api.PATCH("/api/sets/{set_id}", { params: { path: { set_id: id }, header: ifMatch(merge.version) }, body: body as never }));
        queryClient.setQueryData(queries.set(id).queryKey, saved);
        merge.clear();
        toast(`Saved the set ${saved.name}`);
      } catch (e) {
        if (!isStale(e)) throw e;
        // a teammate saved first: show their version, the user's edits kept beside it
        await invalidate(["sets", id]);
        setStale("Not saved: a teammate saved this set meanwhile. The form shows their version, your changes kept; check them and save again.");
        return;
      }
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
      await call(api.DELETE("/api/sets/{set_id}", { params: { path: { set_id: id }, header: ifMatch(merge.version) } }));
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
            <ChangedMeanwhile stored={s} count={merge.conflicts.length} what="set" />
            <form
              className="inline-form set-form"
              data-version={s.version}
              onSubmit={(e) => {
                e.preventDefault();
                update();
              }}
            >
              <span className="merge-field">
                <input name="name" value={field("name")} onChange={(e) => merge.set("name", e.target.value)} aria-label="name" required />
                <Theirs merge={merge} field="name" label="name" />
              </span>
              <span className="merge-field">
                <select name="kind" value={field("kind") || "failure"} onChange={(e) => merge.set("kind", e.target.value)} aria-label="kind">
                  <Options values={KINDS} />
                </select>
                <Theirs merge={merge} field="kind" label="kind" />
              </span>
              <span className="merge-field">
                <input name="description" value={field("description")} onChange={(e) => merge.set("description", e.target.value || null)} placeholder="description" aria-label="description" />
                <Theirs merge={merge} field="description" label="description" />
              </span>
              <span className="merge-field">
                <select name="pinned_tag" value={field("pinned_tag")} onChange={(e) => merge.set("pinned_tag", e.target.value || null)} aria-label="pinned tag">
                  <option value="">not pinned</option>
                  <Options values={[...new Set([...(tags.data?.tags ?? []), ...(field("pinned_tag") ? [field("pinned_tag")] : [])])]} />
                </select>
                <Theirs merge={merge} field="pinned_tag" label="pinned tag" />
              </span>
              <span className="merge-field">
                <select name="assigned_to" value={field("assigned_to")} onChange={(e) => merge.set("assigned_to", e.target.value || null)} aria-label="assigned to">
                  <option value="">nobody assigned</option>
                  <Options values={[...new Set([...assignable, ...(field("assigned_to") ? [field("assigned_to")] : [])])]} />
                </select>
                <Theirs merge={merge} field="assigned_to" label="assignee" />
              </span>
              {may("curator") && (
                <button
                  type="submit"
                  disabled={action.busy || !merge.dirty || merge.conflicts.length > 0}
                  title={merge.conflicts.length > 0 ? "take theirs or keep yours for each field first" : !merge.dirty ? "nothing changed" : undefined}
                >
                  Save
                </button>
              )}
              {may("admin") && (
                <button type="button" className="danger" onClick={() => void deleteSet()}>
                  Delete set
                </button>
              )}
            </form>
            <p className="muted">
              {s.members} members · <Link to={`/?set_id=${enc(id)}`}>browse them</Link> · set id <span className="mono">{s.set_id}</span>
              {s.created_by && ` · made by ${s.created_by}`}
              {s.changed_at && (
                <>
                  {" · "}version {s.version}, saved by {s.changed_by ?? "someone"} <Time value={s.changed_at} />
                </>
              )}
            </p>
          </div>
        )}
      </Async>
      <ActionError message={stale ?? action.error} testid="set-save-error" />
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

/** What one audit row changed: "field: before → after" for each field that differs. */
function ChangeCell({ change }: { change: AuditEntry }) {
  const fields = fieldChanges(change.before, change.after);
  if (fields.length === 0) return <span className="muted">—</span>;
  return (
    <ul className="field-changes">
      {fields.map((f) => (
        <li key={f.field}>
          <span className="muted">{f.field}:</span> {f.before !== "" && <del>{f.before}</del>}
          {f.before !== "" && f.after !== "" && " → "}
          {f.after !== "" && <ins>{f.after}</ins>}
        </li>
      ))}
    </ul>
  );
}

/** The set's last changes (its own and its members'), from the audit log: who did what, when,
 * and each field before and after. */
function SetChanges({ setId }: { setId: string }) {
  const changes = useQuery(queries.audit(setId));
  return (
    <section aria-labelledby="set-changes" className="set-changes">
      <h3 id="set-changes">Changes</h3>
      <Async state={changes} what="changes">
        {(list) => (
          <ListTable
            testid="set-changes"
            columns={["when", "who", "what", "episode", "before → after"]}
            items={list}
            row={(c) => (
              <tr key={c.audit_id}>
                <td>
                  <Time value={c.changed_at} />
                </td>
                <td>{c.who ?? "—"}</td>
                <td>{c.action}</td>
                <td className="mono">{c.episode_id ?? ""}</td>
                <td>
                  <ChangeCell change={c} />
                </td>
              </tr>
            )}
          />
        )}
      </Async>
    </section>
  );
}

/** A member's review: its state, each reviewer's label side by side, and the signed-in
 * person's own review: a category and the failing step, the member's unless they pick
 * another (a reviewer may disagree on where the episode went wrong). */
function ReviewCell({ setId, member, canReview }: { setId: string; member: Member; canReview: boolean }) {
  const reviews = member.reviews ?? [];
  const me = useQuery(queries.me()).data?.name;
  const mine = reviews.find((r) => r.reviewer === me);
  const [step, setStep] = useState<string>(String(mine?.failing_step ?? member.failing_step ?? ""));
  const save = async (category: string) => {
    const failingStep = step.trim() === "" ? null : Number(step);
    try {
      await call(
        api.PUT("/api/sets/{set_id}/members/{episode_id}/review", {
          params: { path: { set_id: setId, episode_id: member.episode_id } },
          body: { failure_category: (category || null) as FailureCategory | null, failing_step: failingStep },
        }),
      );
      toast(`Reviewed ${member.episode_id}: ${category || "no category"}${failingStep != null ? `, failing step ${failingStep}` : ""}`);
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
        <span className="review-mine">
          <input
            type="number"
            min={0}
            className="review-step"
            value={step}
            onChange={(e) => setStep(e.target.value)}
            aria-label={`failing step, as you see it, of ${member.episode_id}`}
            title="the step where it went wrong, in your view (the member's, unless you change it)"
          />
          <select value="" onChange={(e) => void save(e.target.value)} aria-label={`your review of ${member.episode_id}`}>
            <option value="" disabled>
              my review…
            </option>
            <Options values={FAILURE_CATEGORIES} />
          </select>
        </span>
      )}
    </div>
  );
}
