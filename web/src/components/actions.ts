// How an action reads for people: the one-line summary and the badge text. Mirrors
// api/overlay.py (badges) so the server-rendered and the in-page overlays agree.
import type { Step } from "../api/client";

export type Args = Record<string, unknown>;

export const BADGE_ARGS: Record<string, string> = {
  type: "text",
  open: "text",
  answer: "text",
  system_button: "button",
  terminate: "status",
};

export const POINT_ACTIONS = new Set(["click", "long_press", "double_tap"]);

export function args(step: Step): Args {
  return (step.action ?? {}) as Args;
}

export function badgeText(step: Step): string {
  const kind = step.action_type ?? "unparsed";
  const key = BADGE_ARGS[kind];
  const value = key ? args(step)[key] : undefined;
  if (value === undefined || value === null) return kind;
  return key === "text" ? `${kind}: "${String(value)}"` : `${kind}: ${String(value)}`;
}

const pct = (v: number | null | undefined) => (v === null || v === undefined ? "?" : (v * 100).toFixed(0));

export function summary(step: Step): string {
  const kind = step.action_type ?? "unparsed";
  if (POINT_ACTIONS.has(kind)) return `${kind} (${pct(step.x)}%, ${pct(step.y)}%)`;
  if (kind === "swipe") return `swipe ${String(args(step).direction ?? "?")}`;
  if (kind === "drag") return `drag (${pct(step.x)}%, ${pct(step.y)}%) → (${pct(step.x2)}%, ${pct(step.y2)}%)`;
  return badgeText(step);
}
