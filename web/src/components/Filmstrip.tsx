// The episode's screenshots as a strip of thumbnails the server makes once and caches
// (`?max_side=`), a few kilobytes each instead of the full screenshot; the replay prefetches
// the full screenshots around the current step itself.
import { useEffect, useRef } from "react";
import { imageSrc, type Step } from "../api/client";

/** Twice the strip's 96 px height: sharp on high-density screens. */
export const THUMB_SIDE = 192;

export function Filmstrip({ steps, current, onPick }: { steps: Step[]; current: number; onPick: (i: number) => void }) {
  const strip = useRef<HTMLDivElement>(null);
  // Scroll the strip itself: scrollIntoView would also move the browser's Tab starting
  // point to the thumbnail, so the first Tab would skip the skip link.
  useEffect(() => {
    const s = strip.current;
    const thumb = s?.querySelector<HTMLElement>(".current");
    if (!s || !thumb) return;
    const left = thumb.offsetLeft; // the strip is the offset parent (position: relative)
    if (left < s.scrollLeft) s.scrollLeft = left;
    else if (left + thumb.offsetWidth > s.scrollLeft + s.clientWidth) s.scrollLeft = left + thumb.offsetWidth - s.clientWidth;
  }, [current]);
  return (
    <div className="filmstrip" ref={strip} data-testid="filmstrip" role="group" aria-label="steps">
      {steps.map((s, i) => (
        <button
          type="button"
          key={s.step}
          className={`thumb ${i === current ? "current" : ""} ${s.step_reward === 0 ? "zero-reward" : ""}`}
          onClick={() => onPick(i)}
          aria-current={i === current ? "step" : undefined}
          title={`step ${s.step}: ${s.action_view.summary}`}
        >
          {s.image_url ? (
            <img src={imageSrc(s.image_url, THUMB_SIDE)} alt="" decoding="async" style={{ aspectRatio: s.width && s.height ? `${s.width} / ${s.height}` : undefined }} />
          ) : (
            <div className="thumb-missing">no image</div>
          )}
          <span>
            {s.step} {s.action_type ?? "unparsed"}
          </span>
        </button>
      ))}
    </div>
  );
}
