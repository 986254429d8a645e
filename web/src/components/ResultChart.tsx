// A chart of a SQL result: the user picks a column along x (numbers on a scale, anything
// else as categories), a column of numbers up, and bars or a line; drawn by the app's chart
// (LineChart, uPlot), loaded only when a chart is asked for. The choice lives in the
// console's address (`chart=bar&x=task_name&y=episodes`), so a link opens the same chart.
import { Suspense, lazy, useMemo } from "react";
import type { SqlResult } from "../api/client";
import { chartColumns, chartSeries, chartableColumns, type ChartKind } from "../sqlConsole";
import { Loading } from "./Status";

const LineChart = lazy(() => import("./LineChart").then((m) => ({ default: m.LineChart })));

export interface ChartChoice {
  kind: ChartKind | null;
  x: string | null;
  y: string | null;
}

export function ResultChart({ result, choice, onChoose }: { result: SqlResult; choice: ChartChoice; onChoose: (next: ChartChoice) => void }) {
  const { columns, rows } = result;
  const usable = useMemo(() => chartableColumns(columns, rows), [columns, rows]);
  const picked = useMemo(() => chartColumns(columns, rows, choice.x, choice.y), [columns, rows, choice.x, choice.y]);
  const series = useMemo(() => (picked && choice.kind ? chartSeries(columns, rows, picked.x, picked.y) : null), [columns, rows, picked, choice.kind]);
  const choose = (change: Partial<ChartChoice>) =>
    onChoose({ kind: choice.kind, x: picked ? columns[picked.x].name : null, y: picked ? columns[picked.y].name : null, ...change });
  const xName = picked ? columns[picked.x].name : "";
  const yName = picked ? columns[picked.y].name : "";
  return (
    <section className="sql-chart" aria-label="chart of the result">
      <div className="inline-form" role="group" aria-label="chart settings">
        <label>
          Chart{" "}
          <select
            value={choice.kind ?? ""}
            data-testid="sql-chart-kind"
            onChange={(e) => choose({ kind: (e.target.value || null) as ChartKind | null })}
            disabled={!picked}
          >
            <option value="">none</option>
            <option value="bar">bars</option>
            <option value="line">line</option>
          </select>
        </label>
        {picked && choice.kind && (
          <>
            <label>
              x{" "}
              <select value={picked.x} data-testid="sql-chart-x" onChange={(e) => choose({ x: columns[Number(e.target.value)].name })}>
                {usable.x.map((i) => (
                  <option key={i} value={i}>
                    {columns[i].name}
                  </option>
                ))}
              </select>
            </label>
            <label>
              y (numbers){" "}
              <select value={picked.y} data-testid="sql-chart-y" onChange={(e) => choose({ y: columns[Number(e.target.value)].name })}>
                {usable.y.map((i) => (
                  <option key={i} value={i}>
                    {columns[i].name}
                  </option>
                ))}
              </select>
            </label>
          </>
        )}
        {!picked && <span className="muted">No column of numbers to chart.</span>}
      </div>
      {series && choice.kind && (
        <>
          {series.dropped > 0 && (
            <p className="muted" data-testid="sql-chart-dropped">
              {series.dropped} rows without a {xName} are left out.
            </p>
          )}
          <Suspense fallback={<Loading what="the chart" />}>
            <LineChart
              x={series.x}
              series={[{ name: yName, values: series.values }]}
              xLabel={xName}
              bars={choice.kind === "bar"}
              label={`${yName} by ${xName}, as ${choice.kind === "bar" ? "bars" : "a line"}`}
              testid="sql-chart"
            />
          </Suspense>
        </>
      )}
    </section>
  );
}
