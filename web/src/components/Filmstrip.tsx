// The episode's screenshots as a strip. The thumbnails are the original images scaled by
// CSS, not server-side thumbnails: loading them puts every step's screenshot in the
// browser's cache, so stepping through the episode never waits for the network.
import { useEffect, useRef } from "react";
import type { Step } from "../api/client";

export function Filmstrip({ steps, current, onPick }: { steps: Step[]; current: number; onPick: (i: number) => void }) {
  const strip = useRef<HTMLDivElement>(null);
  useEffect(() => {
    strip.current?.querySelector(".current")?.scrollIntoView({ block: "nearest", inline: "nearest" });
  }, [current]);
  return (
    <div className="filmstrip" ref={strip} data-testid="filmstrip">
      {steps.map((s, i) => (
        <button
          type="button"
          key={s.step}
          className={`thumb ${i === current ? "current" : ""} ${s.step_reward === 0 ? "zero-reward" : ""}`}
          onClick={() => onPick(i)}
          title={`step ${s.step}: ${s.action_type ?? "unparsed"}`}
        >
          {s.image_url ? (
            <img src={s.image_url} alt="" decoding="async" style={{ aspectRatio: s.width && s.height ? `${s.width} / ${s.height}` : undefined }} />
          ) : (
            <div className="thumb-missing">no image</div>
          )}
          <span>
            {s.step} {s.action_type}
          </span>
        </button>
      ))}
    </div>
  );
}
