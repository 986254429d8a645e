// Charts drawn by uPlot (canvas: fast with many series), sized to their box: lines over
// iterations or policy versions, and bars (each from 0, up or down). A null value breaks its
// line (an iteration that did not record the metric) rather than faking a point. Forty
// series stay apart (ten colours times four dash patterns), and pointing at (or focusing) a
// legend entry brings its line forward and fades the others (uPlot's series focus). Pointing
// into the chart reads out the values under the cursor. A series can carry a band (its
// interval), shaded between two hidden series drawn after the visible ones.
import { useEffect, useRef, useState } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { barRange } from "./chartScale";

// Tableau 10: colours told apart by most people, colour-blind ones included.
const COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#79706e"];
const DASHES = ["", "7 4", "2 3", "9 3 2 3"];

interface LineStyle {
  color: string;
  dash: string;
}

/** The `i`-th line's colour and dash pattern: 40 distinct styles before any repeats. */
function lineStyle(i: number): LineStyle {
  return { color: COLORS[i % COLORS.length], dash: DASHES[Math.floor(i / COLORS.length) % DASHES.length] };
}

/** The names of a chart's lines, each beside a sample of its line; pointing at or focusing
 * an entry highlights its line. */
function Legend({ lines, onActive }: { lines: ({ name: string } & LineStyle)[]; onActive?: (name: string | null) => void }) {
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

const HEIGHT = 240;
const FONT = "11px system-ui, sans-serif";
const AXIS = { stroke: "#6b7280", font: FONT, labelFont: FONT, grid: { stroke: "#e5e7eb", width: 1 }, ticks: { show: false } };
/** Turned x labels (policy versions) fit side by side; the axis takes the room they need. */
const TURN = 35;
const FADED = 0.12;
/** Tick steps for iterations: whole numbers only. */
const INTEGER_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];

export interface Series {
  name: string;
  values: (number | null)[];
  /** An interval around the line (e.g. 95% over seeds), shaded in the line's colour. */
  band?: { low: (number | null)[]; high: (number | null)[] };
}

export interface LineChartProps {
  /** Numeric x values (iterations), or labels drawn evenly as categories (policy versions, bins). */
  x: number[] | string[];
  series: Series[];
  /** What the chart shows, for screen readers; by default its series "by" its x. */
  label?: string;
  xLabel?: string;
  testid?: string;
  /** Values are rates: 0-100% on the y axis. */
  percent?: boolean;
  bars?: boolean;
  /** A line runs through its own points over x values it has none at (a run's policy
   * versions among every run's), instead of breaking there. */
  joinGaps?: boolean;
}

/** A short tick label: at most 3 significant digits. */
function short(v: number): string {
  return Math.abs(v) >= 1000 ? v.toExponential(1) : String(Number(v.toPrecision(3)));
}

/** With bars below 0, a line at 0 shows where they part from those above (no grid line need
 * fall on 0). */
function drawZeroLine(u: uPlot): void {
  if ((u.scales.y.min ?? 0) >= 0) return;
  const y = Math.round(u.valToPos(0, "y", true));
  const { ctx, bbox } = u;
  ctx.save();
  ctx.strokeStyle = AXIS.stroke;
  ctx.lineWidth = devicePixelRatio;
  ctx.beginPath();
  ctx.moveTo(bbox.left, y);
  ctx.lineTo(bbox.left + bbox.width, y);
  ctx.stroke();
  ctx.restore();
}

const pctText = (v: number) => `${Math.round(v * 100)}%`;
const RAD = (TURN * Math.PI) / 180;

/** The bottom axis's height for labels turned TURN degrees, from their measured width. */
function turnedSize(self: uPlot, values: string[]): number {
  self.ctx.font = FONT;
  const widest = Math.max(0, ...(values ?? []).map((v) => self.ctx.measureText(v ?? "").width));
  return Math.ceil(widest * Math.sin(RAD) + 11 * Math.cos(RAD) + 30);
}

export function LineChart({ x, series, label, xLabel = "iteration", testid, percent = false, bars = false, joinGaps = false }: LineChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const focused = useRef<number | null>(null);
  const [readout, setReadout] = useState("");
  const drawn = series.filter((s) => s.values.some((v) => v !== null));
  // Styles follow the series' place in `series`, so a metric keeps its look when another is empty.
  const styled = drawn.map((s) => ({ ...s, ...lineStyle(series.indexOf(s)) }));
  const categories = typeof x[0] === "string" ? (x as string[]) : null;
  const fmt = percent ? pctText : short;
  // The chart is built again only when what it draws changes, not on every render.
  const what = JSON.stringify([x, drawn, xLabel, percent, bars, joinGaps]);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const xs = categories ? categories.map((_, i) => i) : (x as number[]);
    // Room on the left for the first turned label, beyond the y axis.
    const widest = categories ? Math.max(0, ...categories.map((c) => c.length)) * 6.4 : 0;
    const turned = categories !== null && !bars;
    const opts: uPlot.Options = {
      width: el.clientWidth || 640,
      height: HEIGHT,
      padding: [12, 16, 0, turned ? Math.max(0, widest * Math.cos(RAD) - 44) : 0],
      legend: { show: false },
      cursor: { focus: { prox: 24 }, drag: { x: false, y: false } },
      focus: { alpha: FADED },
      scales: {
        x: categories ? { time: false, range: [-0.5, Math.max(0.5, categories.length - 0.5)] } : { time: false },
        y: percent ? { range: [0, 1] } : bars ? { range: (_u, lo, hi) => barRange(lo, hi) } : {},
      },
      axes: [
        {
          ...AXIS,
          label: xLabel,
          labelSize: 16,
          ...(categories
            ? {
                splits: () => xs,
                values: (_u: uPlot, splits: number[]) => splits.map((i) => categories[i] ?? ""),
                filter: (_u: uPlot, splits: number[]) => splits.map((v, i) => (i % Math.ceil(categories.length / 12) === 0 ? v : null)),
                // turned counter-clockwise, each ending at its tick
                ...(turned ? { rotate: TURN, size: turnedSize } : {}),
              }
            : { incrs: INTEGER_STEPS }),
        },
        { ...AXIS, size: 52, values: (_u: uPlot, splits: number[]) => splits.map(fmt) },
      ],
      series: [
        {},
        ...styled.map((s) => ({
          label: s.name,
          stroke: s.color,
          width: 2,
          dash: s.dash ? s.dash.split(" ").map(Number) : undefined,
          fill: bars ? s.color : undefined,
          paths: bars ? uPlot.paths.bars!({ size: [0.8, 60] }) : undefined,
          points: { show: !bars, size: 6, fill: s.color },
          spanGaps: joinGaps,
        })),
      ],
      hooks: {
        draw: bars ? [drawZeroLine] : [],
        setSeries: [(_u, i, o) => void ((o as { focus?: boolean }).focus !== undefined && (focused.current = i))],
        setCursor: [
          (u) => {
            const i = u.cursor.idx;
            if (i == null) return setReadout("");
            const one = focused.current !== null && focused.current > 0 && focused.current <= styled.length ? [styled[focused.current - 1]] : styled.length <= 6 ? styled : [];
            const interval = (s: (typeof styled)[number]) =>
              s.band && s.band.low[i] != null && s.band.high[i] != null ? ` [${fmt(s.band.low[i] as number)}, ${fmt(s.band.high[i] as number)}]` : "";
            const values = one.filter((s) => s.values[i] != null).map((s) => `${s.name} ${fmt(s.values[i] as number)}${interval(s)}`);
            setReadout(`${xLabel} ${categories ? categories[i] : xs[i]}: ${values.join(" · ") || "point at a line"}`);
          },
        ],
      },
    };
    // Each band's edges are two more series, after the visible ones (so a line's series index
    // stays its place in `styled` + 1); uPlot fills between them.
    const banded = styled.filter((s) => s.band);
    const edges = banded.flatMap((s) => [s.band!.high, s.band!.low]);
    opts.series.push(...edges.map(() => ({ stroke: "transparent", width: 0, points: { show: false } })));
    opts.bands = banded.map((s, i) => ({ series: [styled.length + 1 + 2 * i, styled.length + 2 + 2 * i] as [number, number], fill: `${s.color}33` }));
    const u = new uPlot(opts, [xs, ...styled.map((s) => s.values), ...edges] as uPlot.AlignedData, el);
    plot.current = u;
    // The instance and its x labels, for inspection from the browser (the tests read its
    // series, points and focus).
    Object.assign(el, { plot: u, xLabels: categories ?? xs });
    const resize = new ResizeObserver(() => u.setSize({ width: el.clientWidth, height: HEIGHT }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, [what]); // eslint-disable-line react-hooks/exhaustive-deps -- `what` stands for everything drawn
  if (x.length === 0 || drawn.length === 0) return <p className="muted">No values.</p>;
  const focus = (name: string | null) => plot.current?.setSeries(name === null ? null : styled.findIndex((s) => s.name === name) + 1, { focus: true });
  return (
    <div className="chart-with-legend">
      <div className="chart-box">
        <div ref={box} className="chart" data-testid={testid} role="img" aria-label={label ?? `${drawn.map((s) => s.name).join(", ")} by ${xLabel}`} />
        <p className="chart-readout muted" aria-hidden="true">
          {readout || "\u00a0"}
        </p>
      </div>
      {!bars && <Legend lines={styled} onActive={focus} />}
    </div>
  );
}
