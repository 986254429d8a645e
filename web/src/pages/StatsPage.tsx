// /stats: success rate over policy versions per task (lines), the step-reward histogram and
// the episode-length distribution (bars). Plain SVG: the data is small and the charts simple;
// policy versions are turned labels with room made for them, and 40 tasks keep distinct lines.
import { api, call, type Stats } from "../api/client";
import { FilterBar } from "../components/FilterBar";
import { Legend, XLabel, lineStyle, useHighlight, xLabelRoom } from "../components/LineChart";
import { filterKey, filtersFromQuery } from "../components/filters";
import { Async } from "../components/Status";
import { useApi, useTitle } from "../hooks";
import { useLocation } from "../router";

const W = 640;
const H = 260;
const PAD = { l: 44, r: 12, t: 12, b: 40 };

export function StatsPage() {
  const { query } = useLocation();
  const filters = filtersFromQuery(query);
  const stats = useApi(() => call(api.GET("/api/stats", { params: { query: filters } })), [filterKey(filters)]);
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
  const [, setActive, cls] = useHighlight();
  const versions = [...new Set(stats.success_by_task_policy.map((c) => c.policy_version ?? "?"))];
  const tasks = [...new Set(stats.success_by_task_policy.map((c) => c.task_name ?? "(no task)"))];
  if (versions.length === 0) return <p className="muted">No episodes.</p>;
  const room = xLabelRoom(versions);
  const pad = { ...PAD, l: Math.max(PAD.l, room.left), b: Math.max(PAD.b, room.bottom) };
  const h = H + pad.b - PAD.b;
  const x = (i: number) => pad.l + (versions.length === 1 ? (W - pad.l - pad.r) / 2 : (i * (W - pad.l - pad.r)) / (versions.length - 1));
  const y = (r: number) => pad.t + (1 - r) * (h - pad.t - pad.b);
  const every = Math.ceil(versions.length / 12);
  return (
    <div className="chart-with-legend">
      <svg viewBox={`0 0 ${W} ${h}`} className="chart" data-testid="success-chart" role="img" aria-label={`success rate of ${tasks.length} tasks by policy version`}>
        {[0, 0.25, 0.5, 0.75, 1].map((r) => (
          <g key={r}>
            <line x1={pad.l} x2={W - pad.r} y1={y(r)} y2={y(r)} className="gridline" />
            <text x={pad.l - 6} y={y(r) + 4} textAnchor="end" className="axis">
              {r * 100}%
            </text>
          </g>
        ))}
        {versions.map((v, i) => i % every === 0 && <XLabel key={v} x={x(i)} y={h - pad.b + 14} text={v} />)}
        <text x={W - pad.r} y={h - 6} textAnchor="end" className="axis">
          policy version
        </text>
        {tasks.map((t, ti) => {
          const pts = versions
            .map((v, i) => {
              const c = stats.success_by_task_policy.find((c) => (c.task_name ?? "(no task)") === t && (c.policy_version ?? "?") === v);
              return c && c.success_rate !== null && c.success_rate !== undefined ? ([x(i), y(c.success_rate), c] as const) : null;
            })
            .filter((p) => p !== null);
          const { color, dash } = lineStyle(ti);
          return (
            <g key={t} data-series={t} className={cls(t)}>
              <path d={pts.map((p, i) => `${i ? "L" : "M"}${p[0]},${p[1]}`).join(" ")} fill="none" stroke={color} strokeWidth={2} strokeDasharray={dash || undefined} />
              {pts.map((p) => (
                <circle key={p[0]} cx={p[0]} cy={p[1]} r={4} fill={color}>
                  <title>
                    {t}, policy {p[2].policy_version}: {p[2].successes}/{p[2].episodes}
                  </title>
                </circle>
              ))}
            </g>
          );
        })}
      </svg>
      <Legend lines={tasks.map((t, i) => ({ name: t, ...lineStyle(i) }))} onActive={setActive} />
    </div>
  );
}

type Bin = Stats["length_histogram"][number];

function Bars({ bins, label, what }: { bins: Bin[]; label: (b: Bin) => string; what: string }) {
  if (bins.length === 0) return <p className="muted">No values.</p>;
  const max = Math.max(...bins.map((b) => b.count), 1);
  const bw = (W - PAD.l - PAD.r) / bins.length;
  const every = Math.ceil(bins.length / 10);
  return (
    <svg viewBox={`0 0 ${W} ${H}`} className="chart" role="img" aria-label={`${what}: counts of ${bins.length} bins`}>
      {[0, 0.5, 1].map((f) => (
        <text key={f} x={PAD.l - 6} y={PAD.t + (1 - f) * (H - PAD.t - PAD.b) + 4} textAnchor="end" className="axis">
          {Math.round(max * f)}
        </text>
      ))}
      {bins.map((b, i) => {
        const h = (b.count / max) * (H - PAD.t - PAD.b);
        return (
          <g key={i}>
            <rect x={PAD.l + i * bw + 1} y={H - PAD.b - h} width={Math.max(1, bw - 2)} height={h} className="bar">
              <title>
                {label(b)}: {b.count}
              </title>
            </rect>
            {i % every === 0 && (
              <text x={PAD.l + i * bw + bw / 2} y={H - PAD.b + 16} textAnchor="middle" className="axis">
                {label(b)}
              </text>
            )}
          </g>
        );
      })}
    </svg>
  );
}
