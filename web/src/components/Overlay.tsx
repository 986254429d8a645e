// The step's action drawn over its screenshot as SVG, in the image's own pixel space (the
// SVG's viewBox is the image size and it stretches with the image). It draws the API's
// `action_view` and nothing else: the marker's points are fractions of the screen, and
// `?annotated=1` draws the same object with PIL (lake/vocab/overlay.py, same shapes, colours
// and sizes; the sizes come from overlayGeometry.ts). Both outline every marker and arrow in
// white.
// The badge is HTML text, escaped by React.
import type { Schemas, Step } from "../api/client";
import { arrowHead, markerUnit, strokeWidth, toPixels } from "./overlayGeometry";

const RED = "#e62828";
const ORANGE = "#ff8c00";
const BLUE = "#1e6eff";
const GREEN = "#14be46";
const PURPLE = "#963cdc";
/** The outline drawn under every marker, so it stays seen on an icon of its own colour (a
 * red click on a red icon, a green start on a green button): the server's PIL drawing,
 * lake/vocab/overlay.py, outlines every marker the same way. */
const HALO = "#ffffff";
const haloWidth = (line: number) => Math.max(1.5, line / 2);

type Marker = Schemas["ActionMarker"];

/** How one pass draws: the outline pass paints everything white and `grow` wider; the
 * colour pass paints as asked. Only the colour pass names its points (`data-point`). */
interface Pass {
  halo: boolean;
  grow: number;
}

function paint(pass: Pass, colour: string): string {
  return pass.halo ? HALO : colour;
}

function Dot({ pass, at, r, fill, role }: { pass: Pass; at: number[]; r: number; fill: string; role?: string }) {
  return pass.halo ? (
    <circle data-halo="" cx={at[0]} cy={at[1]} r={r + pass.grow} fill={HALO} />
  ) : (
    <circle data-point={role} cx={at[0]} cy={at[1]} r={r} fill={fill} />
  );
}

function Ring({ pass, at, r, stroke, width }: { pass: Pass; at: number[]; r: number; stroke: string; width: number }) {
  return <circle data-halo={pass.halo ? "" : undefined} cx={at[0]} cy={at[1]} r={r} fill="none" stroke={paint(pass, stroke)} strokeWidth={width + 2 * pass.grow} />;
}

function Line({ pass, from, to, stroke, width, over = 0 }: { pass: Pass; from: number[]; to: number[]; stroke: string; width: number; over?: number }) {
  // `over`: how far the outline runs past the ends along the line (a cross's arms)
  const [dx, dy] = [to[0] - from[0], to[1] - from[1]];
  const len = Math.hypot(dx, dy) || 1;
  const e = pass.halo ? over : 0;
  const [ux, uy] = [(dx / len) * e, (dy / len) * e];
  return (
    <line data-halo={pass.halo ? "" : undefined} x1={from[0] - ux} y1={from[1] - uy} x2={to[0] + ux} y2={to[1] + uy}
      stroke={paint(pass, stroke)} strokeWidth={width + 2 * pass.grow} />
  );
}

function Shapes({ pass, marker, w, h }: { pass: Pass; marker: Marker; w: number; h: number }) {
  const unit = markerUnit(w, h);
  const line = strokeWidth(unit);
  const [a, b] = toPixels(marker.points, w, h);
  switch (marker.kind) {
    case "click": {
      const cross = Math.max(1, Math.floor(line / 2));
      const arm = unit * 1.6;
      return (
        <>
          <Ring pass={pass} at={a} r={unit} stroke={RED} width={line} />
          <Dot pass={pass} at={a} r={unit / 2} fill={RED} role="at" />
          <Line pass={pass} from={[a[0] - arm, a[1]]} to={[a[0] + arm, a[1]]} stroke={RED} width={cross} over={pass.grow} />
          <Line pass={pass} from={[a[0], a[1] - arm]} to={[a[0], a[1] + arm]} stroke={RED} width={cross} over={pass.grow} />
        </>
      );
    }
    case "long_press":
      return (
        <>
          <Ring pass={pass} at={a} r={unit * 1.2} stroke={ORANGE} width={line} />
          <Ring pass={pass} at={a} r={unit * 0.8} stroke={ORANGE} width={line} />
          <Dot pass={pass} at={a} r={unit / 4} fill={ORANGE} role="at" />
        </>
      );
    case "double_tap":
      return (
        <>
          <Ring pass={pass} at={a} r={unit} stroke={RED} width={line} />
          <Ring pass={pass} at={a} r={unit * 0.6} stroke={RED} width={line} />
          <Dot pass={pass} at={a} r={unit / 4} fill={RED} role="at" />
        </>
      );
    case "swipe": {
      const [p1, p2] = arrowHead(a, b, unit);
      return (
        <>
          <Line pass={pass} from={a} to={b} stroke={BLUE} width={line * 2} />
          <polygon data-point={pass.halo ? undefined : "end"} data-halo={pass.halo ? "" : undefined}
            points={`${b[0]},${b[1]} ${p1[0]},${p1[1]} ${p2[0]},${p2[1]}`} fill={paint(pass, BLUE)}
            stroke={pass.halo ? HALO : "none"} strokeWidth={2 * pass.grow} strokeLinejoin="round" />
          <Dot pass={pass} at={a} r={unit / 2} fill={GREEN} role="start" />
        </>
      );
    }
    case "drag":
      // Without its end (b), a drag is its start dot alone; the description adds a badge.
      return (
        <>
          {b && <Line pass={pass} from={a} to={b} stroke={PURPLE} width={line * 2} />}
          {b && <Dot pass={pass} at={b} r={unit / 2} fill={RED} role="end" />}
          <Dot pass={pass} at={a} r={unit / 2} fill={GREEN} role="start" />
        </>
      );
    case "none":
      return null;
  }
}

/** A marker: its white outline first, then its colours over it. */
function MarkerShape({ marker, w, h }: { marker: Marker; w: number; h: number }) {
  if (marker.kind === "none") return null;
  const grow = haloWidth(strokeWidth(markerUnit(w, h)));
  return (
    <g data-marker={marker.kind}>
      <Shapes pass={{ halo: true, grow }} marker={marker} w={w} h={h} />
      <Shapes pass={{ halo: false, grow: 0 }} marker={marker} w={w} h={h} />
    </g>
  );
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
