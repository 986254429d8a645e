// /training and /training/<run>: training runs from the `runs` table, and one run's curves
// over iterations (success rate, loss, reward, time per phase). The trainer's metric keys
// vary with its version and options, so every chart draws whichever of its series exist and
// any other recorded number can be plotted from the picker.
import { useState } from "react";
import { useQuery } from "@tanstack/react-query";
import type { RunDetail } from "../api/client";
import { queries } from "../api/queries";
import { pct } from "../components/JobState";
import { LineChart, type Series } from "../components/LineChart";
import { ListTable } from "../components/ListTable";
import { Options } from "../components/Options";
import { Async } from "../components/Status";
import { useTitle } from "../hooks";
import { Time } from "../components/Time";
import { Link, enc } from "../router";

const SUCCESS_KEYS = ["success_rate", "eval_success_rate"];
const REWARD_KEYS = ["mean_episode_reward", "reward"];
const isLoss = (key: string) => /(^|[._])loss$/.test(key);
const isPhaseTime = (key: string) => key.startsWith("seconds.");

function lastLoss(metrics: Record<string, number | null>): number | null | undefined {
  return metrics["update.loss"] ?? metrics["loss"] ?? Object.entries(metrics).find(([k]) => isLoss(k))?.[1];
}

export function TrainingPage() {
  const runs = useQuery(queries.trainRuns());
  useTitle("Training");
  return (
    <main className="page" data-testid="training-page">
      <h2>Training</h2>
      <Async state={runs} what="training runs">
        {(list) => (
          <ListTable
            testid="runs"
            columns={["run", "iterations", "success rate", "held-out success", "loss", "updated"]}
            items={list}
            row={(r) => (
              <tr key={r.run_id}>
                <td>
                  <Link to={`/training/${enc(r.run_id)}`} className="mono">
                    {r.run_id}
                  </Link>
                </td>
                <td>{r.iterations}</td>
                <td>{pct(r.last_metrics["success_rate"], 1)}</td>
                <td>{pct(r.last_metrics["eval_success_rate"], 1)}</td>
                <td>{lastLoss(r.last_metrics)?.toPrecision(4) ?? "—"}</td>
                <td>
                  <Time value={r.updated_at} />
                </td>
              </tr>
            )}
            empty={
              <>
                No training runs yet: start one with <span className="mono">elake train --env sim</span>.
              </>
            }
          />
        )}
      </Async>
    </main>
  );
}

/** The run's series whose keys are in `keys` (in that order) or pass the test. */
function pick(run: RunDetail, keys: string[] | ((key: string) => boolean)): Series[] {
  const names = Array.isArray(keys) ? keys.filter((k) => k in run.series) : Object.keys(run.series).filter(keys);
  return names.map((name) => ({ name, values: run.series[name] }));
}

export function RunPage({ id }: { id: string }) {
  const run = useQuery(queries.run(id));
  useTitle(`Training run ${id}`);
  const [other, setOther] = useState<string>("");
  return (
    <main className="page" data-testid="run-page">
      <p>
        <Link to="/training">← all training runs</Link>
      </p>
      <Async state={run} what="run">
        {(r) => {
          const x = r.iterations.map((it) => it.iteration);
          const keys = Object.keys(r.series);
          return (
            <>
              <h2>{r.run_id}</h2>
              <p className="muted">
                {r.kind} · {r.iterations.length} iteration(s)
              </p>
              <h3>Success rate</h3>
              <LineChart x={x} series={pick(r, SUCCESS_KEYS)} percent testid="success-curve" />
              <h3>Loss</h3>
              <LineChart x={x} series={pick(r, isLoss)} testid="loss-curve" />
              <div className="charts">
                <div>
                  <h3>Reward</h3>
                  <LineChart x={x} series={pick(r, REWARD_KEYS)} testid="reward-curve" />
                </div>
                <div>
                  <h3>Seconds per phase</h3>
                  <LineChart x={x} series={pick(r, isPhaseTime).map((s) => ({ ...s, name: s.name.slice("seconds.".length) }))} testid="phase-curve" />
                </div>
              </div>
              <h3>
                Any metric{" "}
                <select value={other} onChange={(e) => setOther(e.target.value)} aria-label="metric">
                  <option value="">pick one…</option>
                  <Options values={keys} />
                </select>
              </h3>
              {other && r.series[other] && <LineChart x={x} series={[{ name: other, values: r.series[other] }]} testid="other-curve" />}
              {r.config && (
                <details>
                  <summary>config</summary>
                  <pre className="args">{JSON.stringify(r.config, null, 2)}</pre>
                </details>
              )}
            </>
          );
        }}
      </Async>
    </main>
  );
}
