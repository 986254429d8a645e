// Live updates: episodes a running training or collection records appear without a reload.
// One query polls the episode list with the last ETag it saw (the lake's table versions);
// the server answers 304 until something was written, so an idle lake costs a version
// check every few seconds. A new ETag invalidates the queries of the data recorders
// change (LIVE_KEYS), and only the views on screen refetch.
import { useState } from "react";
import { useQuery } from "@tanstack/react-query";
import { api } from "../api/client";
import { LIVE_KEYS, invalidate, queryClient } from "../api/queries";

const LIVE_POLL_MS = 2000;
const PAUSED_KEY = "elake.live.paused";
const LIVE_KEY = ["live-etag"];

type LiveState = "live" | "paused" | "offline";

/** The lake's ETag now; a change from the last one seen invalidates the live queries. */
async function lakeEtag(): Promise<string | null> {
  const seen = queryClient.getQueryData<string | null>(LIVE_KEY);
  const { response } = await api.GET("/api/episodes", {
    params: { query: { limit: 1 }, header: seen ? { "if-none-match": seen } : {} },
  });
  if (response.status === 304) return seen ?? null;
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  const etag = response.headers.get("ETag");
  if (seen !== undefined && etag !== seen) void invalidate(...LIVE_KEYS); // the first answer is what the views loaded
  return etag;
}

const LABELS: Record<LiveState, [string, string]> = {
  live: ["● Live", "New episodes appear as they are recorded. Click to pause."],
  paused: ["❚❚ Paused", "Live updates are paused. Click to resume."],
  offline: ["○ Offline", "The server does not answer; retrying. Click to pause."],
};

/** The poller and its state in the top bar: live, paused by the user, or offline. The
 * interval stops while the tab is hidden (TanStack's refetchIntervalInBackground: false);
 * the poll on return catches up with what changed meanwhile. */
export function LiveIndicator() {
  const [paused, setPaused] = useState(() => localStorage.getItem(PAUSED_KEY) === "1");
  const poll = useQuery({ queryKey: LIVE_KEY, queryFn: lakeEtag, enabled: !paused, staleTime: 0, refetchInterval: LIVE_POLL_MS });
  const s: LiveState = paused ? "paused" : poll.isError ? "offline" : "live";
  const toggle = () => {
    localStorage.setItem(PAUSED_KEY, paused ? "0" : "1");
    setPaused(!paused);
  };
  const [label, title] = LABELS[s];
  return (
    <button type="button" className={`live live-${s}`} data-testid="live" data-state={s} title={title} aria-pressed={s !== "paused"} onClick={toggle}>
      {label}
    </button>
  );
}
