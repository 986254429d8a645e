// Live updates: episodes a running training or collection records appear without a reload.
// One poller asks the episode list with the last ETag it saw (the lake's table versions);
// the server answers 304 until something was written, so an idle lake costs a version
// check every few seconds. Views that list episodes reload when `useLiveVersion` moves.
import { useEffect, useSyncExternalStore } from "react";
import { api } from "../api/client";

export const LIVE_POLL_MS = 2000;
const PAUSED_KEY = "elake.live.paused";

type LiveState = "live" | "paused" | "offline";

let state: LiveState = localStorage.getItem(PAUSED_KEY) === "1" ? "paused" : "live";
let version = 0;
let etag: string | undefined;
const listeners = new Set<() => void>();

function emit(): void {
  listeners.forEach((l) => l());
}

function subscribe(l: () => void): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

// A function, not `state` itself: the user may pause while a request is out.
const paused = (): boolean => state === "paused";

async function poll(): Promise<void> {
  if (paused() || document.hidden) return;
  try {
    const { response } = await api.GET("/api/episodes", {
      params: { query: { limit: 1 }, header: etag ? { "if-none-match": etag } : {} },
    });
    const next = response.headers.get("ETag") ?? undefined;
    if (response.ok && next !== etag) {
      if (etag !== undefined) version++; // the first answer is what the views loaded
      etag = next;
    }
    const was = state;
    if (!paused()) state = response.ok || response.status === 304 ? "live" : "offline";
    if (response.ok || was !== state) emit();
  } catch {
    if (!paused() && state !== "offline") {
      state = "offline";
      emit();
    }
  }
}

/** Bumps with every change to the lake the poller has seen; 0 until the first. */
export function useLiveVersion(): number {
  return useSyncExternalStore(subscribe, () => version);
}

/** Reloads `reload` whenever the lake changed (not on the first render). */
export function useLiveReload(reload: () => void): void {
  const v = useLiveVersion();
  useEffect(() => {
    if (v > 0) reload();
  }, [v]); // eslint-disable-line react-hooks/exhaustive-deps -- reload is stable (useApi)
}

function toggle(): void {
  state = state === "paused" ? "live" : "paused";
  localStorage.setItem(PAUSED_KEY, state === "paused" ? "1" : "0");
  emit();
  if (state === "live") void poll();
}

const LABELS: Record<LiveState, [string, string]> = {
  live: ["● Live", "New episodes appear as they are recorded. Click to pause."],
  paused: ["❚❚ Paused", "Live updates are paused. Click to resume."],
  offline: ["○ Offline", "The server does not answer; retrying. Click to pause."],
};

/** The poller and its state in the top bar: live, paused by the user, or offline. */
export function LiveIndicator() {
  const s = useSyncExternalStore(subscribe, () => state);
  useEffect(() => {
    void poll();
    const timer = window.setInterval(() => void poll(), LIVE_POLL_MS);
    return () => window.clearInterval(timer);
  }, []);
  const [label, title] = LABELS[s];
  return (
    <button type="button" className={`live live-${s}`} data-testid="live" data-state={s} title={title} aria-pressed={s !== "paused"} onClick={toggle}>
      {label}
    </button>
  );
}
