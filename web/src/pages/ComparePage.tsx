// /compare/<a>/<b>?step=<n>: two episodes side by side, aligned on the step index, with the
// action sequence of both below (rows where they differ are highlighted).
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
  const length = Math.max(a.steps.length, b.steps.length);
  const index = Math.min(Math.max(0, Number(query.get("step") ?? 0) || 0), Math.max(0, length - 1));
  const [annotated, setAnnotated] = useState(true);
  const go = (i: number) => {
    const n = Math.max(0, Math.min(length - 1, i));
    navigate(`/compare/${enc(a.episode.episode_id)}/${enc(b.episode.episode_id)}?step=${n}`, { replace: true });
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
          step index {index} of {length}
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
          <Column key={d.episode.episode_id} detail={d} step={d.steps[index]} annotated={annotated} />
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
                  <button type="button" className="link" aria-label={`step index ${i}`} onClick={(e) => (e.stopPropagation(), go(i))}>
                    {i}
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

function Column({ detail, step, annotated }: { detail: EpisodeDetail; step?: Step; annotated: boolean }) {
  const ep = detail.episode;
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
