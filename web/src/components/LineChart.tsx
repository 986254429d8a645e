// Lines over iterations in plain SVG, drawn like the Stats page's charts (which take their
// line styles, axis labels and legend from here). A null value breaks its line (an
// iteration that did not record the metric) rather than faking a point. Forty series stay
// apart: ten colours times four dash patterns, and pointing at (or focusing) a legend entry
// brings its line forward and fades the others.
import { useState } from "react";

const W = 640;
const H = 240;
const PAD = { l: 52, r: 12, t: 12, b: 36 };
// Tableau 10: colours told apart by most people, colour-blind ones included.
const COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#79706e"];
const DASHES = ["", "7 4", "2 3", "9 3 2 3"];

export interface LineStyle {
  color: string;
  dash: string;
}

/** The `i`-th line's colour and dash pattern: 40 distinct styles before any repeats. */
export function lineStyle(i: number): LineStyle {
  return { color: COLORS[i % COLORS.length], dash: DASHES[Math.floor(i / COLORS.length) % DASHES.length] };
}

/** Which line is brought forward (by the legend), and the class each line gets for it. */
export function useHighlight(): [string | null, (name: string | null) => void, (name: string) => string] {
  const [active, setActive] = useState<string | null>(null);
  const cls = (name: string) => (active === null ? "" : active === name ? "highlighted" : "dimmed");
  return [active, setActive, cls];
}

/** The names of a chart's lines, each beside a sample of its line; pointing at or focusing
 * an entry highlights its line. */
export function Legend({ lines, onActive }: { lines: ({ name: string } & LineStyle)[]; onActive?: (name: string | null) => void }) {
  return (
    <ul className={`legend ${lines.length > 12 ? "legend-many" : ""}`} aria-label="legend">
      {lines.map((l) => (
        <li key={l.name}>
          <button
            type="button"
            className="legend-item"
            onMouseEnter={() => onActive?.(l.name)}
            onMouseLeave={() => onActive?.(null)}
            onFocus={() => onActive?.(l.name)}
            onBlur={() => onActive?.(null)}
          >
            <svg width="22" height="10" aria-hidden="true">
              <line x1="1" y1="5" x2="21" y2="5" stroke={l.color} strokeWidth="2.5" strokeDasharray={l.dash || undefined} />
            </svg>
            <span>{l.name}</span>
          </button>
        </li>
      ))}
    </ul>
  );
}

/** Room for x labels turned 35 degrees: the bottom and left padding their longest needs
 * (11 px text), so none is cut at the chart's edge. */
export function xLabelRoom(labels: string[]): { left: number; bottom: number } {
  const longest = Math.max(0, ...labels.map((l) => l.length)) * 6.4;
  return { left: Math.min(220, longest * Math.cos(0.61) + 10), bottom: Math.min(140, longest * Math.sin(0.61) + 30) };
}

/** An x-axis label at `x`, turned so long labels (policy versions) fit side by side. */
export function XLabel({ x, y, text }: { x: number; y: number; text: string }) {
  return (
    <text x={x} y={y} textAnchor="end" transform={`rotate(-35 ${x} ${y})`} className="axis x-label">
      {text}
    </text>
  );
}

export interface Series {
  name: string;
  values: (number | null)[];
}

/** A short tick label: at most 3 significant digits, or a percentage. */
function tick(v: number, percent: boolean): string {
  if (percent) return `${Math.round(v * 100)}%`;
  return Math.abs(v) >= 1000 ? v.toExponential(1) : String(Number(v.toPrecision(3)));
}

function yRange(series: Series[], percent: boolean): [number, number] {
  if (percent) return [0, 1];
  const all = series.flatMap((s) => s.values.filter((v): v is number => v !== null));
  let lo = Math.min(...all);
  let hi = Math.max(...all);
  if (lo > 0 && lo < hi / 2) lo = 0; // small positive ranges read better from zero
  if (hi === lo) [lo, hi] = [lo - 1, hi + 1];
  return [lo, hi];
}

export function LineChart({ x, series, percent = false, xLabel = "iteration", testid }: { x: number[]; series: Series[]; percent?: boolean; xLabel?: string; testid?: string }) {
  const [, setActive, cls] = useHighlight();
  const drawn = series.filter((s) => s.values.some((v) => v !== null));
  if (x.length === 0 || drawn.length === 0) return <p className="muted">No values.</p>;
  const [lo, hi] = yRange(drawn, percent);
  const xLo = Math.min(...x);
  const xHi = Math.max(...x);
  const px = (v: number) => PAD.l + (xHi === xLo ? (W - PAD.l - PAD.r) / 2 : ((v - xLo) * (W - PAD.l - PAD.r)) / (xHi - xLo));
  const py = (v: number) => PAD.t + (1 - (v - lo) / (hi - lo)) * (H - PAD.t - PAD.b);
  const every = Math.ceil(x.length / 10);
  const styleOf = (s: Series) => lineStyle(series.indexOf(s));
  return (
    <div className="chart-with-legend">
      <svg viewBox={`0 0 ${W} ${H}`} className="chart" data-testid={testid} role="img" aria-label={`${drawn.map((s) => s.name).join(", ")} by ${xLabel}`}>
        {[0, 0.25, 0.5, 0.75, 1].map((f) => {
          const v = lo + f * (hi - lo);
          return (
            <g key={f}>
              <line x1={PAD.l} x2={W - PAD.r} y1={py(v)} y2={py(v)} className="gridline" />
              <text x={PAD.l - 6} y={py(v) + 4} textAnchor="end" className="axis">
                {tick(v, percent)}
              </text>
            </g>
          );
        })}
        {x.map(
          (v, i) =>
            i % every === 0 && (
              <text key={v} x={px(v)} y={H - PAD.b + 16} textAnchor="middle" className="axis">
                {v}
              </text>
            ),
        )}
        <text x={(W + PAD.l) / 2} y={H - 4} textAnchor="middle" className="axis">
          {xLabel}
        </text>
        {drawn.map((s) => {
          const { color, dash } = styleOf(s);
          const path = s.values
            .map((v, i) => (v === null ? null : `${i === 0 || s.values[i - 1] === null ? "M" : "L"}${px(x[i])},${py(v)}`))
            .filter((p) => p !== null)
            .join(" ");
          return (
            <g key={s.name} data-series={s.name} className={cls(s.name)}>
              <path d={path} fill="none" stroke={color} strokeWidth={2} strokeDasharray={dash || undefined} />
              {s.values.map(
                (v, i) =>
                  v !== null && (
                    <circle key={i} cx={px(x[i])} cy={py(v)} r={3} fill={color}>
                      <title>
                        {s.name} at {xLabel} {x[i]}: {percent ? tick(v, true) : v}
                      </title>
                    </circle>
                  ),
              )}
            </g>
          );
        })}
      </svg>
      <Legend lines={drawn.map((s) => ({ name: s.name, ...styleOf(s) }))} onActive={setActive} />
    </div>
  );
}
