// Branching on the replay (docs/branching.md): "Branch from this step" starts a branch job
// (POST /api/branches) for the step shown; the episode's info lists where it branched from,
// its branch jobs with their progress, and its branches by step, each step's with a link to
// Compare them with the episode aligned at that step (/compare/<parent>/<b1>/...?step=K&align=K).
import { useState, type FormEvent } from "react";
import { useQuery } from "@tanstack/react-query";
import { api, call, type BranchCreate, type Episode } from "../api/client";
import { invalidate, queries } from "../api/queries";
import { MAX_COMPARED, compareUrl } from "../pages/compareUrl";
import { useAction } from "../hooks";
import { Link, enc } from "../router";
import { JobState } from "./JobState";
import { Options } from "./Options";
import { RoleNote, useMay } from "./Role";
import { ActionError } from "./Status";
import { mark } from "./TaskTree";
import { count } from "./Time";
import { toast } from "./Toasts";

const POLICIES = ["random", "noisy", "oracle"] as const;

/** "Branch from this step": a curator's form (how many, which policy) for the step shown; a
 * viewer sees which role it needs. Branches of the simulated phone only; others: `elake branch`. */
export function BranchForm({ episode, stepNo }: { episode: Episode; stepNo: number }) {
  const may = useMay();
  const [open, setOpen] = useState(false);
  const [policy, setPolicy] = useState<string>("random");
  const action = useAction();
  if (!may("curator")) return <RoleNote need="curator" what="Branching from a step" testid="branch-role-note" />;
  if (episode.env !== "sim") {
    return (
      <p className="muted branch-form" data-testid="branch-elsewhere">
        Branches of {episode.env ?? "this env"} episodes start from the command line:{" "}
        <span className="mono">
          elake branch {episode.episode_id} --at {stepNo}
        </span>
      </p>
    );
  }
  const start = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget);
    const noise = String(form.get("noise") ?? "").trim();
    const body = {
      episode_id: episode.episode_id,
      at: stepNo,
      n: Number(form.get("n")),
      policy: policy === "noisy" && noise ? `noisy:${noise}` : policy,
    } as BranchCreate; // max_steps and seed take the server's defaults
    action.run(async () => {
      const job = await call(api.POST("/api/branches", { body }));
      toast(`Branching ${episode.episode_id} at step ${job.step ?? stepNo}: ${job.n} branches`);
      setOpen(false);
      await invalidate(["episode", episode.episode_id, "branches"]);
    });
  };
  return (
    <section className="branch-form" aria-label="branch from this step">
      {open ? (
        <form onSubmit={start} className="inline-form" data-testid="branch-form">
          <span>
            Branch from step <strong>{stepNo}</strong>:
          </span>
          <label>
            branches{" "}
            <input name="n" type="number" min={1} max={20} defaultValue={3} required aria-label="number of branches" />
          </label>
          <label>
            policy{" "}
            <select name="policy" value={policy} onChange={(e) => setPolicy(e.target.value)} aria-label="policy of the branches">
              <Options values={POLICIES} />
            </select>
          </label>
          {policy === "noisy" && <input name="noise" type="number" min={0} max={1} step={0.05} placeholder="random share (0.3)" aria-label="share of random steps" />}
          <button type="submit" disabled={action.busy}>
            {action.busy ? "Starting…" : "Start branching"}
          </button>
          <button type="button" className="link" onClick={() => setOpen(false)}>
            cancel
          </button>
        </form>
      ) : (
        <button type="button" onClick={() => setOpen(true)} data-testid="branch-open" title="record continuations of this episode from the step shown, on the simulated phone">
          Branch from this step
        </button>
      )}
      <ActionError message={action.error} testid="branch-error" />
    </section>
  );
}

/** The episode's place in a tree of branches: "branched from <parent> at step K" (linking
 * back), its branch jobs while they run or when they failed, and its branches by step. */
export function EpisodeBranches({ episode }: { episode: Episode }) {
  const id = episode.episode_id;
  const found = useQuery(queries.branches(id));
  const data = found.data;
  const jobs = (data?.jobs ?? []).filter((j) => j.status !== "done" || j.refused.length > 0);
  const byStep = new Map<number, Episode[]>();
  for (const b of data?.branches ?? []) {
    const k = b.branch_step ?? 0;
    byStep.set(k, [...(byStep.get(k) ?? []), b]);
  }
  if (!episode.branch_of && jobs.length === 0 && byStep.size === 0) return null;
  return (
    <div className="branches" data-testid="branches">
      {episode.branch_of && (
        <p data-testid="branched-from">
          branched from{" "}
          <Link to={`/episodes/${enc(episode.branch_of)}/steps/${episode.branch_step ?? 0}`} className="mono">
            {episode.branch_of}
          </Link>{" "}
          at step {episode.branch_step}{" "}
          <span className="muted">(steps before {episode.branch_step} replay the parent's)</span>
        </p>
      )}
      {jobs.map((j) => (
        <p key={j.branch_id} data-testid="branch-job">
          branching at step {j.step} ({j.n} × {j.policy}): <JobState status={j.status} progress={j.progress} error={j.error} />
          {j.refused.length > 0 && (
            <span className="bad">
              {" "}
              {count(j.refused.length, "branch", "branches")} refused: {j.refused[0].error}
            </span>
          )}
        </p>
      ))}
      {[...byStep].map(([k, list]) => (
        <div key={k} className="branch-step" data-testid="branch-list" data-step={k}>
          <span>
            {count(list.length, "branch", "branches")} at step {k}:
          </span>{" "}
          {list.map((b) => (
            <Link key={b.episode_id} to={`/episodes/${enc(b.episode_id)}/steps/${k}`} className="chip mono" aria-label={`branch ${b.episode_id}, ${b.success ? "succeeded" : b.success === false ? "failed" : "not judged"}`}>
              <span className={`mark ${b.success ? "ok" : b.success === false ? "bad" : ""}`} aria-hidden="true">
                {mark(b.success)}
              </span>{" "}
              {b.episode_id}
            </Link>
          ))}{" "}
          <Link to={compareUrl([id, ...list.map((b) => b.episode_id)].slice(0, MAX_COMPARED), k, k)} data-testid="compare-branches">
            Compare at step {k}
          </Link>
          {list.length + 1 > MAX_COMPARED && <span className="muted"> (the first {MAX_COMPARED - 1})</span>}
        </div>
      ))}
    </div>
  );
}
