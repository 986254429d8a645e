// One step's screenshot with its overlay. `data-loaded-step` says which step's image is
// on screen (tests and the benchmark wait on it); a step without a screenshot says so.
import { useLayoutEffect, useRef, useState } from "react";
import type { Step } from "../api/client";
import { Overlay } from "./Overlay";

export function Screen({ step, annotated, maxHeight }: { step: Step; annotated: boolean; maxHeight?: string }) {
  const [loaded, setLoaded] = useState<string | null>(null);
  const img = useRef<HTMLImageElement>(null);
  const key = `${step.episode_id}/${step.step}`;
  // A prefetched image is complete as soon as it is attached: mark it before the first
  // paint instead of a task later, when the load event would come.
  useLayoutEffect(() => {
    if (img.current?.complete && img.current.naturalWidth > 0) setLoaded(key);
  }, [key]);
  if (!step.image_url) {
    return (
      <div className="screen screen-missing" data-testid="screen" data-loaded-step={step.step}>
        <div className="missing">No screenshot was recorded for step {step.step}.</div>
        {annotated && <Overlay step={step} />}
      </div>
    );
  }
  return (
    <div className="screen" data-testid="screen" data-loaded-step={loaded === key ? step.step : undefined}>
      <img
        key={key}
        ref={img}
        src={step.image_url}
        alt={`step ${step.step}`}
        style={{ maxHeight, aspectRatio: step.width && step.height ? `${step.width} / ${step.height}` : undefined }}
        onLoad={() => setLoaded(key)}
        onError={() => setLoaded(key)}
      />
      {annotated && <Overlay step={step} />}
    </div>
  );
}

// Decoded neighbours, kept referenced so the browser keeps their pixels ready.
const warm = new Map<string, HTMLImageElement>();
const WARM_MAX = 12;

/** Fetch and decode the screenshots around `index`, so the next step shows at once. */
export function prefetch(steps: Step[], index: number): void {
  for (const i of [index + 1, index - 1, index + 2]) {
    const url = steps[i]?.image_url;
    if (!url || warm.has(url)) continue;
    const img = new Image();
    img.src = url;
    img.decode().catch(() => undefined); // a failed prefetch is just a cache miss later
    warm.set(url, img);
    if (warm.size > WARM_MAX) warm.delete(warm.keys().next().value!);
  }
}
