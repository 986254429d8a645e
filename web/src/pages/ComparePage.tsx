// /compare/<a>/<b>/<c>...?step=<n>: up to MAX_COMPARED episodes of any tasks side by side,
// each under its task and goal, aligned on the step's place (step <n> of the longest one),
// counted as the replay counts ("step 2 (3/6)"), with the action sequences below (rows
// where they differ are highlighted). The address holds the list, so a comparison opens from
// its link; adding an episode (from any task) or removing one rewrites it. With `&align=K`
// (a parent and its branches, opened from the replay's "Compare at step K") the rows are the
// episodes' step numbers, step K where the branches left the parent is marked, and the
// steps before it read "replayed" in the branches' columns.
import { useDeferredValue, useEffect, useState, type CSSProperties } from "react";
import { useQueries, useQuery } from "@tanstack/react-query";
import type { Episode, EpisodeDetail, Step } from "../api/client";
import { queries } from "../api/queries";
import { Screen } from "../components/Screen";
import { ErrorBox, Loading } from "../components/Status";
import { mark } from "../components/TaskTree";
import { count } from "../components/Time";
import { isShortcut, useTitle } from "../hooks";
import { Link, enc, navigate, useLocation } from "../router";
import { MAX_COMPARED, alignOf, compareUrl, comparedIds } from "./compareUrl";

export { MAX_COMPARED, comparedIds, compareUrl };

/** "a", "a and b", "a, b and c". */
function listed(ids: string[]): string {
  return ids.length <= 1 ? (ids[0] ?? "") : `${ids.slice(0, -1).join(", ")} and ${ids[ids.length - 1]}`;
}

export function ComparePage() {
  const { path, query } = useLocation();
  const ids = comparedIds(path);
  const step = Number(query.get("step") ?? 0) || 0;
  const align = alignOf(query);
  // The replay's own cached details: opening Compare from an episode asks only for the other.
  const loaded = useQueries({ queries: ids.map((id) => queries.episode(id)) });
  useTitle(ids.length ? `Compare ${listed(ids)}` : "Compare");
  const to = (next: string[]) => navigate(compareUrl(next, step, align), { replace: true });
  const failed = loaded.findIndex((q) => q.error);
  const details = loaded.every((q) => q.data) ? loaded.map((q) => q.data as EpisodeDetail) : null;
  return (
    <main className="compare" data-testid="compare">
      {failed >= 0 ? (
        <>
          <ErrorBox error={loaded[failed].error as Error} what={`episode ${ids[failed]}`} retry={() => void loaded[failed].refetch()} />
          <button type="button" onClick={() => to(ids.filter((_, i) => i !== failed))}>
            Compare without {ids[failed]}
          </button>
        </>
      ) : ids.length === 0 ? (
        <>
          <p className="muted">No episodes to compare yet: add some.</p>
          <AddEpisode ids={ids} onAdd={(id) => to([id])} />
        </>
      ) : details ? (
        <Aligned details={details} onChange={to} />
      ) : (
        <Loading what="episodes" />
      )}
    </main>
  );
}

function Aligned({ details, onChange }: { details: EpisodeDetail[]; onChange: (ids: string[]) => void }) {
  const { query } = useLocation();
  const ids = details.map((d) => d.episode.episode_id);
  const align = alignOf(query);
  // The longest episode numbers the rows; `?step=` is its step number, as in the replay's
  // address (an episode's steps are numbered from 0, so all usually agree). Aligned, the rows
  // are every step number any of them has, and each column shows its step of that number.
  const ref = details.reduce((longest, d) => (d.steps.length > longest.steps.length ? d : longest), details[0]);
  const rows = align == null ? ref.steps.map((s) => s.step) : [...new Set(details.flatMap((d) => d.steps.map((s) => s.step)))].sort((a, b) => a - b);
  const length = rows.length;
  const asked = Number(query.get("step") ?? 0) || 0;
  const at = rows.indexOf(asked);
  const index = at >= 0 ? at : Math.min(Math.max(0, asked), Math.max(0, length - 1));
  const stepNo = (i: number) => rows[i] ?? i;
  const stepOf = (d: EpisodeDetail, i: number): Step | undefined => (align == null ? d.steps[i] : d.steps.find((s) => s.step === rows[i]));
  const [annotated, setAnnotated] = useState(true);
  const go = (i: number) => {
    const n = Math.max(0, Math.min(length - 1, i));
    navigate(compareUrl(ids, stepNo(n), align), { replace: true });
  };
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (!isShortcut(e)) return;
      const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
      if (key === "ArrowLeft" || key === "a") go(index - 1);
      else if (key === "ArrowRight" || key === "d") go(index + 1);
      else if (key === "Home") go(0);
      else if (key === "End") go(length - 1);
      else if (key === "o") setAnnotated((x) => !x);
      else return;
      e.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  });
  const tasks = new Set(details.map((d) => d.episode.task_name)).size;
  return (
    <>
      <div className="stepbar">
        <button type="button" onClick={() => go(index - 1)} disabled={index === 0} aria-label="previous step">
          ◀
        </button>
        <span data-testid="compare-step">
          step {stepNo(index)} ({index + 1}/{length})
        </span>
        <button type="button" onClick={() => go(index + 1)} disabled={index >= length - 1} aria-label="next step">
          ▶
        </button>
        <label className="toggle">
          <input type="checkbox" checked={annotated} onChange={() => setAnnotated(!annotated)} /> annotated
        </label>
        {tasks > 1 && <span className="error">These episodes are of {tasks === 2 && details.length === 2 ? "different" : tasks} tasks.</span>}
        {align != null && (
          <span className="muted" data-testid="compare-align">
            aligned at step {align}
            {details.some((d) => d.episode.branch_of != null) && <>: the branches' steps before it replay their parent's</>}
          </span>
        )}
      </div>
      <AddEpisode ids={ids} onAdd={(id) => onChange([...ids, id])} />
      <div className="side-by-side" style={{ "--columns": details.length } as CSSProperties} data-testid="compare-columns">
        {details.map((d) => (
          <Column
            key={d.episode.episode_id}
            detail={d}
            step={stepOf(d, index)}
            annotated={annotated}
            onRemove={ids.length > 1 ? () => onChange(ids.filter((id) => id !== d.episode.episode_id)) : undefined}
          />
        ))}
      </div>
      <p className="muted">Keys: A/D or ←/→ step (with or without Shift) · Home/End · O overlay; or pick a row.</p>
      <div className="compare-table-wrap" tabIndex={0} role="region" aria-label="the actions step by step">
        <table className="grid compare-table">
          <thead>
            <tr>
              <th>#</th>
              {ids.map((id) => (
                <th key={id}>{id}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {Array.from({ length }, (_, i) => {
              const summaries = details.map((d) => stepOf(d, i)?.action_view.summary ?? "—");
              const differs = new Set(summaries).size > 1;
              const point = align != null && stepNo(i) === align;
              return (
                <tr key={i} className={`${i === index ? "current" : ""} ${differs ? "differs" : ""} ${point ? "align-step" : ""}`} onClick={() => go(i)} aria-current={i === index ? "step" : undefined}>
                  <td>
                    <button type="button" className="link" aria-label={`step ${stepNo(i)}`} onClick={(e) => (e.stopPropagation(), go(i))}>
                      {stepNo(i)}
                    </button>
                    {point && <span className="muted"> branch point</span>}
                  </td>
                  {summaries.map((s, j) => (
                    <td key={ids[j]}>{s}</td>
                  ))}
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </>
  );
}

/** Adds an episode of any task: a box narrows the list (id, task or goal), the list is
 * grouped by task. At MAX_COMPARED it says why there is no more room. */
function AddEpisode({ ids, onAdd }: { ids: string[]; onAdd: (id: string) => void }) {
  const [search, setSearch] = useState("");
  const wanted = useDeferredValue(search.trim());
  const found = useQuery({
    ...queries.episodes({ search: wanted || undefined, sort: "task_name", order: "asc", limit: 200 }),
    enabled: ids.length < MAX_COMPARED,
  });
  if (ids.length >= MAX_COMPARED) {
    return (
      <p className="muted compare-add" data-testid="compare-full">
        {MAX_COMPARED} episodes side by side at most: remove one to add another.
      </p>
    );
  }
  const byTask = new Map<string, Episode[]>();
  for (const e of found.data?.items ?? []) {
    if (ids.includes(e.episode_id)) continue;
    const task = e.task_name ?? "(no task)";
    byTask.set(task, [...(byTask.get(task) ?? []), e]);
  }
  return (
    <div className="compare-add inline-form" role="group" aria-label="add an episode to the comparison">
      <label>
        Find{" "}
        <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} placeholder="id, task or goal" data-testid="compare-add-search" />
      </label>
      <label>
        Add{" "}
        <select value="" data-testid="compare-add" onChange={(e) => e.target.value && onAdd(e.target.value)}>
          <option value="">{found.data && byTask.size === 0 ? "no other episode matches" : "an episode of any task…"}</option>
          {[...byTask].map(([task, episodes]) => (
            <optgroup key={task} label={task}>
              {episodes.map((e) => (
                <option key={e.episode_id} value={e.episode_id}>
                  {mark(e.success)} {e.episode_id} ({count(e.episode_length, "step")})
                </option>
              ))}
            </optgroup>
          ))}
        </select>
      </label>
      <span className="muted">
        {ids.length} of {MAX_COMPARED}
      </span>
    </div>
  );
}

function Column({ detail, step, annotated, onRemove }: { detail: EpisodeDetail; step: Step | undefined; annotated: boolean; onRemove?: () => void }) {
  const ep = detail.episode;
  const position = step ? detail.steps.indexOf(step) : -1;
  const replayed = step != null && ep.branch_of != null && ep.branch_step != null && step.step < ep.branch_step;
  return (
    <section className="column" aria-label={`episode ${ep.episode_id}`} data-testid="compare-column">
      <h3>
        <span className={`mark ${ep.success ? "ok" : ep.success === false ? "bad" : ""}`}>{mark(ep.success)}</span>{" "}
        <Link to={`/episodes/${enc(ep.episode_id)}/steps/${step?.step ?? 0}`}>{ep.episode_id}</Link>
        <span className="muted">
          {" "}
          {ep.policy_version && `policy ${ep.policy_version} · `}
          {count(ep.episode_length, "step")}
        </span>
        {onRemove && (
          <>
            {" "}
            <button type="button" className="link compare-remove" onClick={onRemove} aria-label={`remove ${ep.episode_id} from the comparison`}>
              remove
            </button>
          </>
        )}
      </h3>
      <p className="compare-task">
        <strong>{ep.task_name ?? "(no task)"}</strong>
        {ep.task_goal && (
          <>
            {" · "}
            <span className="goal">{ep.task_goal}</span>
          </>
        )}
      </p>
      {ep.branch_of && (
        <p className="muted compare-branch-of" data-testid="compare-branch-of">
          branched from <span className="mono">{ep.branch_of}</span> at step {ep.branch_step}
        </p>
      )}
      {step && (
        <p className="muted" data-testid="compare-column-step">
          step {step.step} ({position + 1}/{detail.steps.length}){replayed && " · replayed"}
        </p>
      )}
      {step ? (
        <>
          <Screen step={step} annotated={annotated} maxHeight="calc(100vh - 400px)" />
          <p className="action-summary">{step.action_view.summary}</p>
          <p className="muted">step reward {step.step_reward ?? "—"} {step.step_reward_reason ? `· ${step.step_reward_reason}` : ""}</p>
        </>
      ) : (
        <p className="muted">This episode ended before this step.</p>
      )}
    </section>
  );
}
