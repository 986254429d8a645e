// /stats: success rate over policy versions per task (lines), the step-reward histogram and
// the episode-length distribution (bars), drawn by the app's uPlot charts: policy versions
// are turned labels with room made for them, and 40 tasks keep distinct lines.
import { useQuery } from "@tanstack/react-query";
import type { Stats } from "../api/client";
import { queries } from "../api/queries";
import { FilterBar } from "../components/FilterBar";
import { LineChart } from "../components/LineChart";
import { filtersFromQuery } from "../components/filters";
import { Async } from "../components/Status";
import { useTitle } from "../hooks";
import { useLocation } from "../router";

export function StatsPage() {
  const { query } = useLocation();
  const filters = filtersFromQuery(query);
  const stats = useQuery(queries.stats(filters));
  useTitle("Stats");
  return (
    <main className="page" data-testid="stats-page">
      <h2>Stats</h2>
      <FilterBar />
      <Async state={stats} what="stats">
        {(s) => (
          <>
            <p className="muted">
              {s.episodes} episodes · {s.steps} steps · {s.step_reward_nulls} steps without a step reward
            </p>
            <h3>Success rate by policy version</h3>
            <SuccessChart stats={s} />
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
        )}
      </Async>
    </main>
  );
}

function SuccessChart({ stats }: { stats: Stats }) {
  const cells = stats.success_by_task_policy;
  const versions = [...new Set(cells.map((c) => c.policy_version ?? "?"))];
  const tasks = [...new Set(cells.map((c) => c.task_name ?? "(no task)"))];
  if (versions.length === 0) return <p className="muted">No episodes.</p>;
  const rate = new Map(cells.map((c) => [`${c.task_name ?? "(no task)"}\u0000${c.policy_version ?? "?"}`, c.success_rate ?? null]));
  const series = tasks.map((t) => ({ name: t, values: versions.map((v) => rate.get(`${t}\u0000${v}`) ?? null) }));
  return (
    <LineChart x={versions} series={series} percent xLabel="policy version" testid="success-chart" label={`success rate of ${tasks.length} tasks by policy version`} />
  );
}

type Bin = Stats["length_histogram"][number];

function Bars({ bins, label, what }: { bins: Bin[]; label: (b: Bin) => string; what: string }) {
  if (bins.length === 0) return <p className="muted">No values.</p>;
  return <LineChart bars x={bins.map(label)} series={[{ name: "episodes", values: bins.map((b) => b.count) }]} xLabel={what} label={`${what}: counts of ${bins.length} bins`} />;
}
