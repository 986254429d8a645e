// Lines over iterations in plain SVG, drawn like the Stats page's charts (which take their
// line colours and legend from here). A null value breaks its line (an iteration that did
// not record the metric) rather than faking a point.
const W = 640;
const H = 240;
const PAD = { l: 52, r: 12, t: 12, b: 36 };
const COLORS = ["#1e6eff", "#e62828", "#14be46", "#ff8c00", "#963cdc", "#00a5a5", "#b45f06", "#555"];

/** The colour of the `i`-th line of a chart (they repeat after eight). */
export function lineColor(i: number): string {
  return COLORS[i % COLORS.length];
}

/** The names of a chart's lines, each beside a swatch of its colour. */
export function Legend({ lines }: { lines: { name: string; color: string }[] }) {
  return (
    <ul className="legend">
      {lines.map((l) => (
        <li key={l.name}>
          <span className="swatch" style={{ background: l.color }} /> {l.name}
        </li>
      ))}
    </ul>
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
  const drawn = series.filter((s) => s.values.some((v) => v !== null));
  if (x.length === 0 || drawn.length === 0) return <p className="muted">No values.</p>;
  const [lo, hi] = yRange(drawn, percent);
  const xLo = Math.min(...x);
  const xHi = Math.max(...x);
  const px = (v: number) => PAD.l + (xHi === xLo ? (W - PAD.l - PAD.r) / 2 : ((v - xLo) * (W - PAD.l - PAD.r)) / (xHi - xLo));
  const py = (v: number) => PAD.t + (1 - (v - lo) / (hi - lo)) * (H - PAD.t - PAD.b);
  const every = Math.ceil(x.length / 10);
  const colorOf = (s: Series) => lineColor(series.indexOf(s));
  return (
    <div className="chart-with-legend">
      <svg viewBox={`0 0 ${W} ${H}`} className="chart" data-testid={testid} role="img" aria-label={drawn.map((s) => s.name).join(", ")}>
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
          const color = colorOf(s);
          const path = s.values
            .map((v, i) => (v === null ? null : `${i === 0 || s.values[i - 1] === null ? "M" : "L"}${px(x[i])},${py(v)}`))
            .filter((p) => p !== null)
            .join(" ");
          return (
            <g key={s.name} data-series={s.name}>
              <path d={path} fill="none" stroke={color} strokeWidth={2} />
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
      <Legend lines={drawn.map((s) => ({ name: s.name, color: colorOf(s) }))} />
    </div>
  );
}
