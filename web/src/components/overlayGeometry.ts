// Where the action marker goes on a screenshot: pure arithmetic over the API's
// `action_view` marker, shared by the SVG overlay and its unit tests. The sizes match the
// server's PIL drawing (lake/vocab/overlay.py) so `?annotated=1` and the app agree.

/** One unit is 1/54 of the shorter side (~20 px on a 1080-wide screen), at least 8 px. */
export function markerUnit(w: number, h: number): number {
  return Math.max(8, Math.min(w, h) / 54);
}

/** Rounds as Python's round() does (a half to the even neighbour), so a size computed
 * here equals the server's: Math.round(2.5) is 3, Python's round(2.5) is 2. */
export function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const diff = x - floor;
  if (diff !== 0.5) return Math.round(x);
  return floor % 2 === 0 ? floor : floor + 1;
}

/** The stroke width for a marker of `unit`: a fifth of it, at least 2 px. */
export function strokeWidth(unit: number): number {
  return Math.max(2, roundHalfEven(unit / 5));
}

/** A marker's points (fractions of the screen) in the image's own pixels. */
export function toPixels(points: { x: number; y: number }[], w: number, h: number): number[][] {
  return points.map((p) => [p.x * w, p.y * h]);
}

/** The two back corners of a swipe's arrow head at `b`, pointing away from `a`. */
export function arrowHead(a: number[], b: number[], unit: number): [number[], number[]] {
  const angle = Math.atan2(b[1] - a[1], b[0] - a[0]);
  const head = unit * 1.2;
  return [
    [b[0] - head * Math.cos(angle - 0.45), b[1] - head * Math.sin(angle - 0.45)],
    [b[0] - head * Math.cos(angle + 0.45), b[1] - head * Math.sin(angle + 0.45)],
  ];
}
