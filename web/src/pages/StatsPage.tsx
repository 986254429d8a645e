// /stats: success rate over policy versions (lines), the step-reward histogram and the
// episode-length distribution (bars), drawn by the app's uPlot charts: policy versions are
// turned labels with room made for them, and 40 lines keep distinct styles. A policy version
// belongs to its run (two runs' "checkpoint-10" are two policies), so over several runs the
// chart draws one line per run, each through its own versions only; picking a run (the
// "lines" choice, which is the filter's run) draws a line per task of that run.
import { useQuery } from "@tanstack/react-query";
import type { Stats } from "../api/client";
import { queries } from "../api/queries";
import { FilterBar } from "../components/FilterBar";
import { LineChart } from "../components/LineChart";
import { filtersFromQuery } from "../components/filters";
import { Async } from "../components/Status";
import { useTitle } from "../hooks";
import { navigate, useLocation, withQuery } from "../router";

type Cell = Stats["success_by_task_policy"][number];

const NO_RUN = "(no run)";
const NO_VERSION = "?";
const runOf = (c: Cell) => c.run_id ?? NO_RUN;
const versionOf = (c: Cell) => c.policy_version ?? NO_VERSION;
/** Policy versions in order: numbers as numbers ("checkpoint-9" before "checkpoint-10"), none last. */
const byVersion = (a: string, b: string) => (a === NO_VERSION ? 1 : b === NO_VERSION ? -1 : a.localeCompare(b, undefined, { numeric: true }));

export function StatsPage() {
  const { path, query } = useLocation();
  const filters = filtersFromQuery(query);
  const stats = useQuery(queries.stats(filters));
  // With a run picked, the other runs still to pick from: the same filter without the run.
  const { run_id, ...others } = filters;
  const run = run_id ?? undefined;
  const everyRun = useQuery({ ...queries.stats(others), enabled: run !== undefined });
  useTitle("Stats");
  const pick = (value: string) => {
    const q = new URLSearchParams(query);
    if (value) q.set("run_id", value);
    else q.delete("run_id");
    navigate(withQuery(path, q));
  };
  return (
    <main className="page" data-testid="stats-page">
      <h2>Stats</h2>
      <FilterBar />
      <Async state={stats} what="stats">
        {(s) => {
          const runs = [...new Set((run !== undefined ? (everyRun.data ?? s) : s).success_by_task_policy.map(runOf))];
          if (run !== undefined && !runs.includes(run)) runs.push(run);
          return (
            <>
              <p className="muted">
                {s.episodes} episodes · {s.steps} steps · {s.step_reward_nulls} steps without a step reward
              </p>
              <h3>Success rate by policy version</h3>
              {(runs.length > 1 || run !== undefined) && (
                <label className="chart-pick">
                  lines
                  <select aria-label="lines" value={run ?? ""} onChange={(e) => pick(e.target.value)}>
                    <option value="">one per run (its own versions)</option>
                    {runs
                      .filter((r) => r !== NO_RUN)
                      .map((r) => (
                        <option key={r} value={r}>
                          {r}: one per task
                        </option>
                      ))}
                  </select>
                </label>
              )}
              <SuccessChart cells={s.success_by_task_policy} perRun={run === undefined && runs.length > 1} />
              <div className="charts">
                <div>
                  <h3>Step reward</h3>
                  <Bars bins={s.step_reward_histogram} label={(b) => b.lo.toFixed(2)} what="step reward" />
                </div>
                <div>
                  <h3>Episode length</h3>
                  <Bars bins={s.length_histogram} label={(b) => (b.hi - b.lo === 1 ? String(b.lo) : `${b.lo}-${b.hi - 1}`)} what="episode length" />
                </div>
              </div>
            </>
          );
        }}
      </Async>
    </main>
  );
}

/** Success rate by policy version: a line per run (its tasks together, each run through its
 * own versions), or, for one run, a line per task. */
function SuccessChart({ cells, perRun }: { cells: Cell[]; perRun: boolean }) {
  const versions = [...new Set(cells.map(versionOf))].sort(byVersion);
  if (versions.length === 0) return <p className="muted">No episodes.</p>;
  const lineOf = perRun ? runOf : (c: Cell) => c.task_name ?? "(no task)";
  const names = [...new Set(cells.map(lineOf))];
  // successes and judged episodes per line and version; the rate is over judged episodes
  const sums = new Map<string, { ok: number; judged: number }>();
  for (const c of cells) {
    const key = `${lineOf(c)}\u0000${versionOf(c)}`;
    const sum = sums.get(key) ?? { ok: 0, judged: 0 };
    sum.ok += c.successes;
    sum.judged += c.judged;
    sums.set(key, sum);
  }
  const rate = (name: string, v: string) => {
    const sum = sums.get(`${name}\u0000${v}`);
    return sum && sum.judged > 0 ? sum.ok / sum.judged : null;
  };
  const series = names.map((n) => ({ name: n, values: versions.map((v) => rate(n, v)) }));
  const what = perRun ? `${names.length} runs, each through its own policy versions` : `${names.length} tasks`;
  return <LineChart x={versions} series={series} percent joinGaps={perRun} xLabel="policy version" testid="success-chart" label={`success rate of ${what}`} />;
}

type Bin = Stats["length_histogram"][number];

function Bars({ bins, label, what }: { bins: Bin[]; label: (b: Bin) => string; what: string }) {
  if (bins.length === 0) return <p className="muted">No values.</p>;
  return <LineChart bars x={bins.map(label)} series={[{ name: "episodes", values: bins.map((b) => b.count) }]} xLabel={what} label={`${what}: counts of ${bins.length} bins`} />;
}
