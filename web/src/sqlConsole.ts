// The SQL console's plain logic: which tables it offers and how a failure reads.
import { ApiError } from "./api/client";

/** Every table of the lake, as the SQL sandbox names them (lake/core/schema.py's TABLES;
 * tests/web/test_unit.py checks the two agree). */
export const SQL_TABLES = [
  "episodes", "steps", "sets", "set_members", "annotations", "exports", "runs", "jobs", "saved_views", "lineage",
] as const;

/** A failed query's message said once: without the error type and the server's own
 * "query failed:" prefix, which the page's "The query failed" already says. */
export function sqlFailure(error: unknown): string {
  let text = error instanceof Error ? error.message : String(error);
  if (error instanceof ApiError && error.type && text.startsWith(`${error.type}: `)) text = text.slice(error.type.length + 2);
  return text.replace(/^query failed:\s*/i, "");
}

/** Seconds since `since` as the running timer shows them (one decimal under a minute). */
export function elapsedText(ms: number): string {
  const s = ms / 1000;
  return s < 60 ? `${s.toFixed(1)} s` : `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
}
