// /, /episodes/<id> and /episodes/<id>/steps/<n>: the task tree, the replay and the panels.
import { memo, useCallback, useEffect, useRef, useState, type ReactNode } from "react";
import { flushSync } from "react-dom";
import { useQuery } from "@tanstack/react-query";
import type { EpisodeDetail } from "../api/client";
import { queries } from "../api/queries";
import { CurationPanel } from "../components/CurationPanel";
import { EpisodeEdits } from "../components/EpisodeEdits";
import { FilterBar } from "../components/FilterBar";
import { QueueBar } from "../components/QueueBar";
import { SavedViews } from "../components/SavedViews";
import { Filmstrip } from "../components/Filmstrip";
import { useFound } from "../components/Found";
import { Screen, prefetch, type Zoom } from "../components/Screen";
import { Async } from "../components/Status";
import { StepPanel } from "../components/StepPanel";
import { TaskTree, mark } from "../components/TaskTree";
import { OverviewPage } from "./OverviewPage";
import { count } from "../components/Time";
import { isShortcut, useTitle } from "../hooks";
import { Link, enc, navigate, useLocation, withQuery } from "../router";
import { BulkAdd } from "../components/BulkAdd";
import { RoleNote, useMay } from "../components/Role";
import { BranchForm, EpisodeBranches } from "../components/Branches";

const OVERLAY_KEY = "elake.overlay";

export function EpisodePage({ id, step }: { id?: string; step?: string }) {
  const detail = useQuery({ ...queries.episode(id ?? ""), enabled: id !== undefined });
  const ep = detail.data?.episode;
  useTitle(id ? (ep ? `${ep.task_name ?? "(no task)"} · ${ep.episode_id}` : `Episode ${id}`) : "Overview");
  return (
    <div className={`browse ${id ? "has-episode" : ""}`}>
      <aside className="left">
        <FilterBar />
        <SavedViews />
        <CuratorsOnly>
          <BulkAdd />
        </CuratorsOnly>
        <TaskTree currentEpisode={id} currentTask={detail.data?.episode.task_name} />
      </aside>
      {id ? (
        <Async state={detail} what={`episode ${id}`}>
          {(d) => <Replay key={d.episode.episode_id} detail={d} stepParam={step} />}
        </Async>
      ) : (
        <OverviewPage />
      )}
    </div>
  );
}

function Replay({ detail, stepParam }: { detail: EpisodeDetail; stepParam?: string }) {
  const { query, key, silent } = useLocation();
  const may = useMay();
  const ep = detail.episode;
  const steps = detail.steps;
  const fromUrl = stepParam === undefined ? steps[0]?.step : Number(stepParam);
  // The step lives here and the address bar follows it silently, so a key press paints the
  // next step before the router hears of it. A navigation from outside (a link,
  // back/forward) resets it; the silent ones only catch the URL up with it.
  const [stepNo, setStepNo] = useState(fromUrl);
  useEffect(() => {
    if (!silent) setStepNo(fromUrl);
  }, [fromUrl, key, silent]);
  const index = steps.findIndex((s) => s.step === stepNo);
  const [zoom, setZoom] = useState<Zoom>(1);
  const [annotated, setAnnotated] = useState(() => localStorage.getItem(OVERLAY_KEY) !== "off");
  const [redacted, setRedacted] = useState(false);
  const found = useFound(ep.episode_id);
  const toggle = () =>
    setAnnotated((a) => {
      localStorage.setItem(OVERLAY_KEY, a ? "off" : "on");
      return !a;
    });
  const go = (i: number) => {
    const to = Math.max(0, Math.min(steps.length - 1, i));
    if (!steps[to] || to === index) return;
    flushSync(() => setStepNo(steps[to].step)); // render the next step now, not a task later
    navigate(withQuery(`/episodes/${enc(ep.episode_id)}/steps/${steps[to].step}`, query), { silent: true });
  };
  useEffect(() => {
    if (index >= 0) prefetch(steps, index);
  }, [steps, index]);
  const current = steps[index];
  const currentStep = useRef(stepNo);
  currentStep.current = current?.step ?? 0;
  const compare = useCallback(
    (other: string) => navigate(`/compare/${enc(ep.episode_id)}/${enc(other)}?step=${currentStep.current}`),
    [ep.episode_id],
  );
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (!isShortcut(e)) return;
      if (e.key === "ArrowLeft" || e.key === "a" || e.key === "A") go(index - 1);
      else if (e.key === "ArrowRight" || e.key === "d" || e.key === "D") go(index + 1);
      else if (e.key === "Home") go(0);
      else if (e.key === "End") go(steps.length - 1);
      else if (e.key === "o" || e.key === "O") toggle();
      else if (e.key === "z" || e.key === "Z") setZoom((z) => ((z % 3) + 1) as Zoom);
      else return;
      e.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  });
  return (
    <>
      <main className="centre">
        <EpisodeHeader detail={detail} onCompare={compare} />
        <QueueBar episodeId={ep.episode_id} />
        {steps.length === 0 ? (
          <p className="muted">This episode has no steps.</p>
        ) : !current ? (
          <div className="error" role="alert">
            Episode {ep.episode_id} has no step {stepParam}. <Link to={`/episodes/${enc(ep.episode_id)}/steps/${steps[0].step}`}>Go to the first step</Link>
          </div>
        ) : (
          <>
            <div className="stepbar">
              <button type="button" onClick={() => go(index - 1)} disabled={index === 0} aria-label="previous step">
                ◀
              </button>
              <span data-testid="step-counter">
                step {current.step} ({index + 1}/{steps.length})
              </span>
              <button type="button" onClick={() => go(index + 1)} disabled={index === steps.length - 1} aria-label="next step">
                ▶
              </button>
              <span className="action-summary">{current.action_view.summary}</span>
              <label className="toggle">
                <input type="checkbox" checked={annotated} onChange={toggle} data-testid="overlay-toggle" /> annotated
              </label>
              <label className="toggle" title="the screenshot as an export with --redact writes it">
                <input type="checkbox" checked={redacted} onChange={() => setRedacted((r) => !r)} data-testid="redact-toggle" /> redaction preview
              </label>
              <button type="button" onClick={() => setZoom((z) => (z === 1 ? 2 : 1))} aria-pressed={zoom > 1} title="zoom (Z, or click the screenshot)">
                {zoom > 1 ? `${zoom}× · fit` : "zoom"}
              </button>
            </div>
            <Screen
              step={current}
              annotated={annotated}
              fill
              zoom={zoom}
              onZoom={() => setZoom((z) => (z === 1 ? 2 : 1))}
              found={found?.steps.get(current.step)?.screen?.boxes}
              redact={redacted}
            />
            <Filmstrip steps={steps} current={index} onPick={go} />
          </>
        )}
      </main>
      <aside className="right">
        {current && <StepPanel step={current} detail={detail} found={found} />}
        {current && <BranchForm episode={ep} stepNo={current.step} />}
        {may("curator") ? <CurationPanel detail={detail} stepNo={current?.step ?? 0} /> : <RoleNote need="curator" what="Curating episodes" />}
        {may("admin") && <EpisodeEdits episode={ep} stepNo={current?.step ?? 0} firstStep={steps[0]?.step ?? 0} />}
      </aside>
    </>
  );
}

// Memoised: it does not change with the step, and its peer list can be long.
const EpisodeHeader = memo(function EpisodeHeader({ detail, onCompare }: { detail: EpisodeDetail; onCompare: (other: string) => void }) {
  const ep = detail.episode;
  const peers = useQuery(queries.episodes({ task: ep.task_name ?? undefined, limit: 100 }));
  return (
    <header className="episode-header">
      <h2>
        <span className={`mark ${ep.success ? "ok" : ep.success === false ? "bad" : ""}`}>{mark(ep.success)}</span> {ep.task_name}
        <span className="mono muted"> {ep.episode_id}</span>
      </h2>
      <p className="goal">{ep.task_goal}</p>
      <p className="meta">
        {ep.status} · {count(ep.episode_length, "step")} · reward {ep.episode_reward ?? "—"} · eval {ep.eval_score ?? "—"}
        {ep.policy_version && <> · policy {ep.policy_version}</>}
        {ep.run_id && <> · run {ep.run_id}</>}
        {ep.env && <> · {ep.env}</>}
        {ep.group_id && (
          <>
            {" "}
            · <Link to={`/groups/${enc(ep.group_id)}`}>group {ep.group_id}</Link>
          </>
        )}
        {ep.eval_reason && <> · {ep.eval_reason}</>}
      </p>
      <EpisodeBranches episode={ep} />
      <label className="compare-pick">
        Compare with{" "}
        <select
          value=""
          data-testid="compare-select"
          onChange={(e) => e.target.value && onCompare(e.target.value)}
        >
          <option value="">another episode of this task…</option>
          {peers.data?.items
            .filter((p) => p.episode_id !== ep.episode_id)
            .map((p) => (
              <option key={p.episode_id} value={p.episode_id}>
                {mark(p.success)} {p.episode_id} ({count(p.episode_length, "step")})
              </option>
            ))}
        </select>
      </label>
    </header>
  );
});

/** Children only for a curator or above (filing many episodes at once, say). */
function CuratorsOnly({ children }: { children: ReactNode }) {
  return useMay()("curator") ? <>{children}</> : null;
}
