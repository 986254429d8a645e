// The action drawn over a screenshot as SVG, in the image's own pixel space (the SVG's
// viewBox is the image size and it stretches with the image). Markers as in
// api/overlay.py: click red ring + dot + cross-hair, long_press orange double ring,
// double_tap red double ring, swipe blue arrow from its start (green dot), drag purple line
// with green start and red end; other actions are a badge (HTML text, escaped by React).
import type { Step } from "../api/client";
import { args, badgeText } from "./actions";

const RED = "#e62828";
const ORANGE = "#ff8c00";
const BLUE = "#1e6eff";
const GREEN = "#14be46";
const PURPLE = "#963cdc";
const DIRECTIONS: Record<string, [number, number]> = { up: [0, -1], down: [0, 1], left: [-1, 0], right: [1, 0] };

function Marker({ step, w, h }: { step: Step; w: number; h: number }) {
  const unit = Math.max(8, Math.min(w, h) / 54);
  const line = Math.max(2, unit / 5);
  const at = step.x != null && step.y != null ? [step.x * w, step.y * h] : null;
  let end = step.x2 != null && step.y2 != null ? [step.x2 * w, step.y2 * h] : null;
  switch (step.action_type) {
    case "click":
      if (!at) return null;
      return (
        <g data-marker="click">
          <circle cx={at[0]} cy={at[1]} r={unit} fill="none" stroke={RED} strokeWidth={line} />
          <circle cx={at[0]} cy={at[1]} r={unit / 2} fill={RED} />
          <line x1={at[0] - unit * 1.6} y1={at[1]} x2={at[0] + unit * 1.6} y2={at[1]} stroke={RED} strokeWidth={line / 2} />
          <line x1={at[0]} y1={at[1] - unit * 1.6} x2={at[0]} y2={at[1] + unit * 1.6} stroke={RED} strokeWidth={line / 2} />
        </g>
      );
    case "long_press":
      if (!at) return null;
      return (
        <g data-marker="long_press">
          <circle cx={at[0]} cy={at[1]} r={unit * 1.2} fill="none" stroke={ORANGE} strokeWidth={line} />
          <circle cx={at[0]} cy={at[1]} r={unit * 0.8} fill="none" stroke={ORANGE} strokeWidth={line} />
          <circle cx={at[0]} cy={at[1]} r={unit / 4} fill={ORANGE} />
        </g>
      );
    case "double_tap":
      if (!at) return null;
      return (
        <g data-marker="double_tap">
          <circle cx={at[0]} cy={at[1]} r={unit} fill="none" stroke={RED} strokeWidth={line} />
          <circle cx={at[0]} cy={at[1]} r={unit * 0.6} fill="none" stroke={RED} strokeWidth={line} />
          <circle cx={at[0]} cy={at[1]} r={unit / 4} fill={RED} />
        </g>
      );
    case "swipe": {
      const start = at ?? [w / 2, h / 2];
      if (!end) {
        const [dx, dy] = DIRECTIONS[String(args(step).direction ?? "up").toLowerCase()] ?? DIRECTIONS.up;
        const len = 0.2 * Math.min(w, h);
        end = [start[0] + dx * len, start[1] + dy * len];
      }
      const angle = Math.atan2(end[1] - start[1], end[0] - start[0]);
      const head = unit * 1.2;
      const p1 = [end[0] - head * Math.cos(angle - 0.45), end[1] - head * Math.sin(angle - 0.45)];
      const p2 = [end[0] - head * Math.cos(angle + 0.45), end[1] - head * Math.sin(angle + 0.45)];
      return (
        <g data-marker="swipe">
          <line x1={start[0]} y1={start[1]} x2={end[0]} y2={end[1]} stroke={BLUE} strokeWidth={line * 2} />
          <polygon points={`${end[0]},${end[1]} ${p1[0]},${p1[1]} ${p2[0]},${p2[1]}`} fill={BLUE} />
          <circle cx={start[0]} cy={start[1]} r={unit / 2} fill={GREEN} />
        </g>
      );
    }
    case "drag":
      if (!at || !end) return null;
      return (
        <g data-marker="drag">
          <line x1={at[0]} y1={at[1]} x2={end[0]} y2={end[1]} stroke={PURPLE} strokeWidth={line * 2} />
          <circle cx={at[0]} cy={at[1]} r={unit / 2} fill={GREEN} />
          <circle cx={end[0]} cy={end[1]} r={unit / 2} fill={RED} />
        </g>
      );
    default:
      return null;
  }
}

const MARKED = new Set(["click", "long_press", "double_tap", "swipe", "drag"]);

export function Overlay({ step }: { step: Step }) {
  const w = step.width ?? 1000;
  const h = step.height ?? 1000;
  const hasMarker = MARKED.has(step.action_type ?? "") && (step.action_type === "swipe" || step.x != null);
  return (
    <>
      <svg className="overlay" data-testid="overlay" data-action={step.action_type ?? "unparsed"} viewBox={`0 0 ${w} ${h}`} preserveAspectRatio="none">
        <Marker step={step} w={w} h={h} />
      </svg>
      {!hasMarker && (
        <div className={`badge badge-${step.action_type ?? "unparsed"}`} data-testid="badge">
          {badgeText(step)}
        </div>
      )}
    </>
  );
}
