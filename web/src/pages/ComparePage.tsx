// /compare/<a>/<b>?step=<n>: two episodes side by side, each under its task and goal, aligned
// on the step's place (step <n> of the longer one), counted as the replay counts ("step 2
// (3/6)"), with the action sequence of both below (rows where they differ are highlighted).
import { useEffect, useState } from "react";
import { useQueries } from "@tanstack/react-query";
import type { EpisodeDetail, Step } from "../api/client";
import { queries } from "../api/queries";
import { Screen } from "../components/Screen";
import { Async } from "../components/Status";
import { mark } from "../components/TaskTree";
import { count } from "../components/Time";
import { isShortcut, useTitle } from "../hooks";
import { Link, enc, navigate, useLocation } from "../router";

export function ComparePage({ a, b }: { a: string; b: string }) {
  // The replay's own cached details: opening Compare from an episode asks only for the other.
  const both = useQueries({
    queries: [queries.episode(a), queries.episode(b)],
    combine: ([qa, qb]) => ({
      data: qa.data && qb.data ? ([qa.data, qb.data] as const) : undefined,
      error: qa.error ?? qb.error,
      refetch: () => Promise.all([qa.refetch(), qb.refetch()]),
    }),
  });
  useTitle(`Compare ${a} and ${b}`);
  return (
    <main className="compare" data-testid="compare">
      <Async state={both} what="episodes">
        {([da, db]) => <Aligned a={da} b={db} />}
      </Async>
    </main>
  );
}

function Aligned({ a, b }: { a: EpisodeDetail; b: EpisodeDetail }) {
  const { query } = useLocation();
  // The longer episode numbers the rows; `?step=` is its step number, as in the replay's
  // address (an episode's steps are numbered from 0, so both usually agree).
  const ref = b.steps.length > a.steps.length ? b : a;
  const length = ref.steps.length;
  const asked = Number(query.get("step") ?? 0) || 0;
  const at = ref.steps.findIndex((s) => s.step === asked);
  const index = at >= 0 ? at : Math.min(Math.max(0, asked), Math.max(0, length - 1));
  const stepNo = (i: number) => ref.steps[i]?.step ?? i;
  const [annotated, setAnnotated] = useState(true);
  const go = (i: number) => {
    const n = Math.max(0, Math.min(length - 1, i));
    navigate(`/compare/${enc(a.episode.episode_id)}/${enc(b.episode.episode_id)}?step=${stepNo(n)}`, { replace: true });
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
  const sameTask = a.episode.task_name === b.episode.task_name;
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
        {!sameTask && <span className="error">These episodes are of different tasks.</span>}
      </div>
      <div className="side-by-side">
        {[a, b].map((d) => (
          <Column key={d.episode.episode_id} detail={d} index={index} annotated={annotated} />
        ))}
      </div>
      <p className="muted">Keys: A/D or ←/→ step (with or without Shift) · Home/End · O overlay; or pick a row.</p>
      <table className="grid compare-table">
        <thead>
          <tr>
            <th>#</th>
            <th>{a.episode.episode_id}</th>
            <th>{b.episode.episode_id}</th>
          </tr>
        </thead>
        <tbody>
          {Array.from({ length }, (_, i) => {
            const sa = a.steps[i] ? a.steps[i].action_view.summary : "—";
            const sb = b.steps[i] ? b.steps[i].action_view.summary : "—";
            return (
              <tr key={i} className={`${i === index ? "current" : ""} ${sa !== sb ? "differs" : ""}`} onClick={() => go(i)} aria-current={i === index ? "step" : undefined}>
                <td>
                  <button type="button" className="link" aria-label={`step ${stepNo(i)}`} onClick={(e) => (e.stopPropagation(), go(i))}>
                    {stepNo(i)}
                  </button>
                </td>
                <td>{sa}</td>
                <td>{sb}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </>
  );
}

function Column({ detail, index, annotated }: { detail: EpisodeDetail; index: number; annotated: boolean }) {
  const ep = detail.episode;
  const step: Step | undefined = detail.steps[index];
  return (
    <section className="column">
      <h3>
        <span className={`mark ${ep.success ? "ok" : ep.success === false ? "bad" : ""}`}>{mark(ep.success)}</span>{" "}
        <Link to={`/episodes/${enc(ep.episode_id)}/steps/${step?.step ?? 0}`}>{ep.episode_id}</Link>
        <span className="muted">
          {" "}
          {ep.policy_version && `policy ${ep.policy_version} · `}
          {count(ep.episode_length, "step")}
        </span>
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
      {step && (
        <p className="muted" data-testid="compare-column-step">
          step {step.step} ({index + 1}/{detail.steps.length})
        </p>
      )}
      {step ? (
        <>
          <Screen step={step} annotated={annotated} maxHeight="calc(100vh - 360px)" />
          <p className="action-summary">{step.action_view.summary}</p>
          <p className="muted">step reward {step.step_reward ?? "—"} {step.step_reward_reason ? `· ${step.step_reward_reason}` : ""}</p>
        </>
      ) : (
        <p className="muted">This episode ended before this step.</p>
      )}
    </section>
  );
}
