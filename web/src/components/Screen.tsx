// One step's screenshot with its overlay. `data-loaded-step` says which step's image is
// on screen (tests and the benchmark wait on it); a step without a screenshot says so.
// Zoom scales the image inside a scrolling frame; the overlay is drawn in the image's box,
// so the action stays on its spot at any zoom, and the frame scrolls to the action.
// `found` boxes the lines a text search matched; `redact` shows the screenshot as
// `elake export --redact` would write it (`?redact=1`), with the rules that masked it.
import { type CSSProperties, useLayoutEffect, useRef, useState } from "react";
import { useQuery } from "@tanstack/react-query";
import type { OcrBox, Step } from "../api/client";
import { queries } from "../api/queries";
import { FoundBoxes } from "./Found";
import { Overlay } from "./Overlay";

export type Zoom = 1 | 2 | 3;

export function Screen({
  step,
  annotated,
  maxHeight,
  zoom = 1,
  onZoom,
  found,
  redact = false,
  fill = false,
}: {
  step: Step;
  annotated: boolean;
  /** The image's height limit (a CSS length); ignored with `fill`. */
  maxHeight?: string;
  /** Fill the height its column leaves (the replay): styles.css sizes it, `.screen-frame.fill`. */
  fill?: boolean;
  zoom?: Zoom;
  onZoom?: () => void;
  found?: OcrBox[];
  redact?: boolean;
}) {
  const [loaded, setLoaded] = useState<string | null>(null);
  const img = useRef<HTMLImageElement>(null);
  const frame = useRef<HTMLDivElement>(null);
  const redaction = useQuery({ ...queries.redaction(step.episode_id, step.step), enabled: redact && !!step.image_url });
  const key = `${step.episode_id}/${step.step}${redact ? "/redacted" : ""}`;
  // A prefetched image is complete as soon as it is attached: mark it before the first
  // paint instead of a task later, when the load event would come.
  useLayoutEffect(() => {
    if (img.current?.complete && img.current.naturalWidth > 0) setLoaded(key);
  }, [key]);
  const point = step.action_view.marker.points[0];
  useLayoutEffect(() => {
    const f = frame.current;
    const i = img.current;
    if (!f || !i || zoom === 1 || !point) return;
    f.scrollTo(point.x * i.clientWidth - f.clientWidth / 2, point.y * i.clientHeight - f.clientHeight / 2);
  }, [zoom, key, point]);
  if (!step.image_url) {
    return (
      <div className="screen screen-missing" data-testid="screen" data-loaded-step={step.step}>
        <div className="missing">No screenshot was recorded for step {step.step}.</div>
        {annotated && <Overlay step={step} />}
      </div>
    );
  }
  if (redact && !redaction.data) {
    // Not the original while the preview is asked for: the mask must show, or why it cannot.
    return (
      <div className="screen screen-missing" data-testid="screen" data-loaded-step={redaction.error ? step.step : undefined}>
        <div className="missing" role={redaction.error ? "alert" : "status"} data-testid={redaction.error ? "redaction-error" : undefined}>
          {redaction.error ? <>Cannot preview the redaction: {redaction.error.message}</> : "Loading the redaction preview…"}
        </div>
      </div>
    );
  }
  const zoomed = zoom > 1 && (fill || !!maxHeight);
  const frameStyle = fill ? ({ "--zoom": zoom } as CSSProperties) : zoomed ? { maxHeight } : undefined;
  return (
    <>
    <div className={`screen-frame ${fill ? "fill" : ""} ${zoomed ? "zoomed" : ""}`} ref={frame} style={frameStyle} tabIndex={zoomed ? 0 : undefined} aria-label={zoomed ? "zoomed screenshot" : undefined}>
      <div className="screen" data-testid="screen" data-loaded-step={loaded === key ? step.step : undefined} data-zoom={zoom}>
        <img
          key={key}
          ref={img}
          src={redact ? `${step.image_url}?redact=1` : step.image_url}
          alt={`step ${step.step}: ${step.action_view.summary}`}
          style={{
            ...(fill
              ? {}
              : {
                  maxHeight: zoomed ? "none" : maxHeight,
                  maxWidth: zoomed ? "none" : undefined,
                  height: zoomed ? `calc((${maxHeight}) * ${zoom})` : undefined,
                }),
            aspectRatio: step.width && step.height ? `${step.width} / ${step.height}` : undefined,
            cursor: onZoom ? (zoom > 1 ? "zoom-out" : "zoom-in") : undefined,
          }}
          onClick={onZoom}
          onLoad={() => setLoaded(key)}
          onError={() => setLoaded(key)}
        />
        {found && found.length > 0 && <FoundBoxes boxes={found} />}
        {annotated && <Overlay step={step} />}
      </div>
    </div>
    {redact && redaction.data && <RedactionNote rules={redaction.data.rules} masked={redaction.data.regions.map((r) => r.rule)} />}
    </>
  );
}

/** Which rules masked how many lines, and the rules in force. */
function RedactionNote({ rules, masked }: { rules: string[]; masked: string[] }) {
  const counts = new Map<string, number>();
  for (const rule of masked) counts.set(rule, (counts.get(rule) ?? 0) + 1);
  return (
    <p className="redaction-note" data-testid="redaction-note" role="status">
      Redaction preview, as <code>--redact</code> exports it:{" "}
      {masked.length === 0 ? (
        "no text line matches a rule, nothing masked"
      ) : (
        <>
          {masked.length} {masked.length === 1 ? "line" : "lines"} masked (
          {[...counts].map(([rule, n], i) => (
            <span key={rule} data-rule={rule}>
              {i > 0 && ", "}
              {rule} ×{n}
            </span>
          ))}
          )
        </>
      )}
      . Rules: {rules.join(", ")}.
    </p>
  );
}

// Decoded neighbours, kept referenced so the browser keeps their pixels ready.
const warm = new Map<string, HTMLImageElement>();
const WARM_MAX = 12;

/** Fetch and decode the screenshots around `index` (and the episode's ends, for Home and
 * End), so the next step shows at once. */
export function prefetch(steps: Step[], index: number): void {
  for (const i of [index + 1, index - 1, index + 2, steps.length - 1, 0]) {
    const url = steps[i]?.image_url;
    if (!url || warm.has(url)) continue;
    const img = new Image();
    img.src = url;
    img.decode().catch(() => undefined); // a failed prefetch is just a cache miss later
    warm.set(url, img);
    if (warm.size > WARM_MAX) warm.delete(warm.keys().next().value!);
  }
}
