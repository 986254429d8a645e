// The step's action drawn over its screenshot as SVG, in the image's own pixel space (the
// SVG's viewBox is the image size and it stretches with the image). It draws the API's
// `action_view` and nothing else: the marker's points are fractions of the screen, and
// `?annotated=1` draws the same object with PIL (lake/vocab/overlay.py, same shapes, colours
// and sizes; the sizes come from overlayGeometry.ts). Both outline markers in white: this one
// its red markers, the server's every marker and arrow.
// The badge is HTML text, escaped by React.
import type { Schemas, Step } from "../api/client";
import { arrowHead, markerUnit, strokeWidth, toPixels } from "./overlayGeometry";

const RED = "#e62828";
const ORANGE = "#ff8c00";
const BLUE = "#1e6eff";
const GREEN = "#14be46";
const PURPLE = "#963cdc";
/** The outline under red markers (click, double tap), so they stay seen on red icons (the
 * server's PIL drawing, lake/vocab/overlay.py, outlines every marker the same way). */
const HALO = "#ffffff";
const haloWidth = (line: number) => Math.max(1.5, line / 2);

type Marker = Schemas["ActionMarker"];

function Dot({ at, r, fill, role }: { at: number[]; r: number; fill: string; role?: string }) {
  return <circle data-point={role} cx={at[0]} cy={at[1]} r={r} fill={fill} />;
}

function Ring({ at, r, stroke, width }: { at: number[]; r: number; stroke: string; width: number }) {
  return <circle cx={at[0]} cy={at[1]} r={r} fill="none" stroke={stroke} strokeWidth={width} />;
}

function MarkerShape({ marker, w, h }: { marker: Marker; w: number; h: number }) {
  const unit = markerUnit(w, h);
  const line = strokeWidth(unit);
  const [a, b] = toPixels(marker.points, w, h);
  switch (marker.kind) {
    case "click": {
      // A white halo under the red: on a red icon the marker keeps its outline.
      const halo = haloWidth(line);
      const cross = Math.max(1, Math.floor(line / 2));
      return (
        <g data-marker="click">
          <circle data-halo="" cx={a[0]} cy={a[1]} r={unit} fill="none" stroke={HALO} strokeWidth={line + 2 * halo} />
          <circle data-halo="" cx={a[0]} cy={a[1]} r={unit / 2 + halo} fill={HALO} />
          <line data-halo="" x1={a[0] - unit * 1.6 - halo} y1={a[1]} x2={a[0] + unit * 1.6 + halo} y2={a[1]} stroke={HALO} strokeWidth={cross + 2 * halo} />
          <line data-halo="" x1={a[0]} y1={a[1] - unit * 1.6 - halo} x2={a[0]} y2={a[1] + unit * 1.6 + halo} stroke={HALO} strokeWidth={cross + 2 * halo} />
          <Ring at={a} r={unit} stroke={RED} width={line} />
          <Dot at={a} r={unit / 2} fill={RED} role="at" />
          <line x1={a[0] - unit * 1.6} y1={a[1]} x2={a[0] + unit * 1.6} y2={a[1]} stroke={RED} strokeWidth={cross} />
          <line x1={a[0]} y1={a[1] - unit * 1.6} x2={a[0]} y2={a[1] + unit * 1.6} stroke={RED} strokeWidth={cross} />
        </g>
      );
    }
    case "long_press":
      return (
        <g data-marker="long_press">
          <Ring at={a} r={unit * 1.2} stroke={ORANGE} width={line} />
          <Ring at={a} r={unit * 0.8} stroke={ORANGE} width={line} />
          <Dot at={a} r={unit / 4} fill={ORANGE} role="at" />
        </g>
      );
    case "double_tap":
      return (
        <g data-marker="double_tap">
          <circle data-halo="" cx={a[0]} cy={a[1]} r={unit} fill="none" stroke={HALO} strokeWidth={line + 2 * haloWidth(line)} />
          <circle data-halo="" cx={a[0]} cy={a[1]} r={unit * 0.6} fill="none" stroke={HALO} strokeWidth={line + 2 * haloWidth(line)} />
          <Ring at={a} r={unit} stroke={RED} width={line} />
          <Ring at={a} r={unit * 0.6} stroke={RED} width={line} />
          <Dot at={a} r={unit / 4} fill={RED} role="at" />
        </g>
      );
    case "swipe": {
      const [p1, p2] = arrowHead(a, b, unit);
      return (
        <g data-marker="swipe">
          <line x1={a[0]} y1={a[1]} x2={b[0]} y2={b[1]} stroke={BLUE} strokeWidth={line * 2} />
          <polygon data-point="end" points={`${b[0]},${b[1]} ${p1[0]},${p1[1]} ${p2[0]},${p2[1]}`} fill={BLUE} />
          <Dot at={a} r={unit / 2} fill={GREEN} role="start" />
        </g>
      );
    }
    case "drag":
      // Without its end (b), a drag is its start dot alone; the description adds a badge.
      return (
        <g data-marker="drag">
          {b && <line x1={a[0]} y1={a[1]} x2={b[0]} y2={b[1]} stroke={PURPLE} strokeWidth={line * 2} />}
          {b && <Dot at={b} r={unit / 2} fill={RED} role="end" />}
          <Dot at={a} r={unit / 2} fill={GREEN} role="start" />
        </g>
      );
    case "none":
      return null;
  }
}

export function Overlay({ step }: { step: Step }) {
  const w = step.width ?? 1000;
  const h = step.height ?? 1000;
  const view = step.action_view;
  return (
    <>
      <svg className="overlay" data-testid="overlay" data-action={step.action_type ?? "unparsed"} viewBox={`0 0 ${w} ${h}`} preserveAspectRatio="none">
        <MarkerShape marker={view.marker} w={w} h={h} />
      </svg>
      {view.badge && (
        <div className={`badge badge-${view.badge}`} data-testid="badge">
          {view.summary}
        </div>
      )}
    </>
  );
}
