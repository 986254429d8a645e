// /training and /training/<run>: training runs from the `runs` table, and one run's curves
// over iterations (success rate, loss, reward, time per phase). The trainer's metric keys
// vary with its version and options, so every chart draws whichever of its series exist and
// any other recorded number can be plotted from the picker.
import { useState } from "react";
import { useQueries, useQuery } from "@tanstack/react-query";
import type { RunArm, RunDetail } from "../api/client";
import { queries } from "../api/queries";
import { pct } from "../components/JobState";
import { LineChart, type Series } from "../components/LineChart";
import { ListTable } from "../components/ListTable";
import { Options } from "../components/Options";
import { Async } from "../components/Status";
import { useAddressValue, useTitle } from "../hooks";
import { Time } from "../components/Time";
import { Link, enc, navigate, useLocation } from "../router";
import { align, configDiff, overlayFromQuery, smooth } from "./runOverlay";
import { bound, lastN } from "./overSeeds";
import { episodesWhere, readByRun } from "../lineage";

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
  const { query } = useLocation();
  const [overlaid, setOverlaid] = useAddressValue(overlayFromQuery(query), query.get("overlay") ?? "");
  const toggle = (id: string) => {
    const next = overlaid.includes(id) ? overlaid.filter((r) => r !== id) : [...overlaid, id];
    setOverlaid(next);
    navigate(next.length ? `/training?overlay=${next.map(enc).join(",")}` : "/training", { replace: true });
  };
  return (
    <main className="page" data-testid="training-page">
      <h2>Training</h2>
      <OverSeeds />
      {overlaid.length > 0 && <Overlay ids={overlaid} configs={Object.fromEntries((runs.data ?? []).map((r) => [r.run_id, r.config]))} />}
      <h3>Runs</h3>
      <Async state={runs} what="training runs">
        {(list) => list.length === 0 ? (
          <p className="muted" data-testid="runs">
            No training runs yet: start one with <span className="mono">elake train --env sim</span>.
          </p>
        ) : (
          <>
          <p className="muted">Tick runs to draw them over each other, with the settings they differ in.</p>
          <ListTable
            testid="runs"
            columns={["overlay", "run", "algo", "policy", "seed", "iterations", "success rate", "held-out success", "loss", "updated"]}
            items={list}
            row={(r) => (
              <tr key={r.run_id}>
                <td>
                  <input type="checkbox" checked={overlaid.includes(r.run_id)} onChange={() => toggle(r.run_id)} aria-label={`overlay ${r.run_id}`} />
                </td>
                <td>
                  <Link to={`/training/${enc(r.run_id)}`} className="mono">
                    {r.run_id}
                  </Link>
                </td>
                <td>{r.algo ?? "—"}</td>
                <td>{r.policy ?? "—"}</td>
                <td>{r.seed ?? "—"}</td>
                <td>{r.iterations}</td>
                <td>{pct(r.last_metrics["success_rate"], 1)}</td>
                <td>{pct(r.last_metrics["eval_success_rate"], 1)}</td>
                <td>{lastLoss(r.last_metrics)?.toPrecision(4) ?? "—"}</td>
                <td>
                  <Time value={r.updated_at} />
                </td>
              </tr>
            )}
          />
          </>
        )}
      </Async>
    </main>
  );
}

/** Any runs drawn over each other: one metric (any the runs recorded), smoothed over a
 * trailing window, and the settings the runs differ in. */
function Overlay({ ids, configs }: { ids: string[]; configs: Record<string, Record<string, unknown> | undefined> }) {
  const details = useQueries({ queries: ids.map((id) => queries.run(id)) });
  const [metric, setMetric] = useState("eval_success_rate");
  const [span, setSpan] = useState(1);
  const loaded = details.flatMap((d) => (d.data ? [d.data] : []));
  const keys = [...new Set(loaded.flatMap((r) => Object.keys(r.series)))].sort();
  const shown = keys.includes(metric) ? metric : (keys[0] ?? metric);
  const { x, values } = align(loaded.map((r) => ({ iterations: r.iterations.map((it) => it.iteration), values: r.series[shown] ?? [] })));
  const series = loaded.map((r, i) => ({ name: r.run_id, values: smooth(values[i], span) }));
  const diff = configDiff(ids.map((id) => configs[id] ?? {}));
  const rate = /success_rate$|^credit\./.test(shown);
  return (
    <section aria-labelledby="overlay-title" data-testid="overlay">
      <h3 id="overlay-title">
        {ids.length} run{ids.length === 1 ? "" : "s"} overlaid{" "}
        <select value={shown} onChange={(e) => setMetric(e.target.value)} aria-label="overlay metric">
          <Options values={keys.length ? keys : [metric]} />
        </select>{" "}
        <label>
          smoothing{" "}
          <select value={span} onChange={(e) => setSpan(Number(e.target.value))} aria-label="smoothing window">
            {[1, 3, 5, 10].map((w) => (
              <option key={w} value={w}>
                {w === 1 ? "none" : `mean of last ${w}`}
              </option>
            ))}
          </select>
        </label>
      </h3>
      <LineChart x={x} series={series} percent={rate} testid="overlay-curve" label={`${shown} of the overlaid runs by iteration`} />
      {ids.length > 1 && (
        <ListTable
          testid="config-diff"
          columns={["setting", ...ids]}
          items={diff}
          row={(d) => (
            <tr key={d.key}>
              <td className="mono">{d.key}</td>
              {d.values.map((v, i) => (
                <td key={ids[i]} className="mono">
                  {v}
                </td>
              ))}
            </tr>
          )}
          empty={<>The runs' settings are the same.</>}
        />
      )}
    </section>
  );
}

/** The metrics "over seeds" offers: key, name, whether it is a rate (0-100%). */
const SEED_METRICS: [string, string, boolean][] = [
  ["eval_success_rate", "held-out success", true],
  ["success_rate", "training success", true],
  ["mean_episode_reward", "training reward (progress steps + result)", false],
  // trainer/credit.py: how often a paid step's advantage tops an unpaid one's (0.5 = none)
  ["credit.within_state", "credit in one screen state (judge-paid step ranked first)", false],
];

/** A mean [low, high]: rates as percentages (the interval cut to 0-100%, where rates lie),
 * other numbers as they are; the interval left out with one run. */
function meanText(m: RunArm["final"], rate: boolean): string {
  if (!m) return "—";
  const show = rate ? (v: number) => pct(v, 1) : (v: number) => v.toFixed(3);
  const cut = rate ? (v: number) => pct(Math.min(1, Math.max(0, v)), 1) : show;
  return m.low == null || m.high == null ? show(m.mean) : `${show(m.mean)} [${cut(m.low)}, ${cut(m.high)}]`;
}

/** Runs that differ only in their seed, as arms: each arm's mean over its runs with the 95%
 * interval shaded, so a comparison rests on more than one seed's luck. Shown once some arm
 * has two runs or more. */
function OverSeeds() {
  const [metric, setMetric] = useState(SEED_METRICS[0][0]);
  const arms = useQuery(queries.runsOverSeeds(metric));
  const list = arms.data?.arms ?? [];
  const rate = SEED_METRICS.find(([key]) => key === metric)?.[2] ?? false;
  if (!list.some((a) => a.runs.length > 1)) return null;
  const x = [...new Set(list.flatMap((a) => a.iterations))].sort((a, b) => a - b);
  const series = list.map((a) => {
    const at = (values: (number | null)[]) => x.map((i) => { const k = a.iterations.indexOf(i); return k < 0 ? null : values[k]; });
    return {
      name: `${a.label} (${a.runs.length} seed${a.runs.length === 1 ? "" : "s"})`,
      values: at(a.per_iteration.map((p) => p.mean)),
      // a rate's interval is cut to 0-100% in the chart as in the table: rates lie there
      band: { low: at(a.per_iteration.map((p) => bound(p.low, rate))), high: at(a.per_iteration.map((p) => bound(p.high, rate))) },
    };
  });
  return (
    <section aria-labelledby="over-seeds-title" data-testid="over-seeds">
      <h3 id="over-seeds-title">
        Over seeds{" "}
        <select value={metric} onChange={(e) => setMetric(e.target.value)} aria-label="metric over seeds">
          {SEED_METRICS.map(([key, name]) => (
            <option key={key} value={key}>
              {name}
            </option>
          ))}
        </select>
      </h3>
      <p className="muted">
        Runs whose settings differ only in the seed form one arm: its mean over the runs per iteration, shaded by the 95% interval (Student t).
      </p>
      <LineChart x={x} series={series} percent={rate} testid="seeds-curve" label={`${metric} over seeds by iteration`} />
      <ListTable
        testid="arms"
        columns={["arm", "seeds", `${lastN(list)}, mean [95%]`, "runs"]}
        items={list}
        row={(a) => (
          <tr key={a.label}>
            <td className="mono">{a.label}</td>
            <td>{a.seeds.map((s) => s ?? "?").join(", ")}</td>
            <td>{meanText(a.final, rate)}</td>
            <td>
              {a.runs.map((id, i) => (
                <span key={id}>
                  {i > 0 && ", "}
                  <Link to={`/training/${enc(id)}`} className="mono">
                    {id}
                  </Link>
                </span>
              ))}
            </td>
          </tr>
        )}
      />
    </section>
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
                {r.kind} · {r.iterations.filter((it) => it.iteration >= 0).length} iteration(s) ·{" "}
                {r.iterations.some((it) => it.iteration < 0) && <>SFT warm-up at iteration -1 · </>}
                <Link to={episodesWhere(readByRun(r.run_id))} data-testid="run-episodes">
                  episodes its checkpoints were trained on
                </Link>
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
