// A background job's state (an export, a re-run): its status, a progress bar while it runs
// in this server, and its error once it failed.
import type { ErrorDetail, JobProgress } from "../api/client";

export function JobState({ status, progress, error }: { status?: string | null; progress?: JobProgress | null; error?: ErrorDetail | null }) {
  const total = progress?.total;
  return (
    <span className={`job job-${status ?? "unknown"}`} data-testid="job-state" data-status={status ?? ""}>
      <span className="job-status">{status ?? "unknown"}</span>
      {status === "running" && progress && (
        <>
          {" "}
          <progress value={progress.done} max={Math.max(total ?? 1, 1)} aria-label="progress" />{" "}
          <span className="muted">{total == null ? "starting" : `${progress.done}/${total}`}</span>
        </>
      )}
      {error && (
        <span className="job-error" role="alert">
          {error.type}: {error.message}
        </span>
      )}
    </span>
  );
}

/** A rate in [0, 1] as a percentage; an em dash when there is none. */
export function pct(rate: number | null | undefined, digits = 0): string {
  return rate == null ? "—" : `${(100 * rate).toFixed(digits)}%`;
}
