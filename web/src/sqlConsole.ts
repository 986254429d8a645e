// The SQL console's plain logic: how a failure reads, sorting a result, which rows show a
// screenshot, the query history.
import { ApiError } from "./api/client";

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

/** One cell of a result, as `sortRows` compares it. */
type SortCell = unknown;

/** The rows' order under a click on a column: numbers by value, text by locale, NULLs last
 * either way; the original order breaks ties (a stable sort). Returns row indexes. */
export function sortRows(rows: SortCell[][], column: number, descending: boolean): number[] {
  const order = rows.map((_, i) => i);
  const rank = (v: SortCell) => (v === null || v === undefined ? 2 : typeof v === "number" || typeof v === "boolean" ? 0 : 1);
  return order.sort((a, b) => {
    const x = rows[a][column];
    const y = rows[b][column];
    const rx = rank(x);
    const ry = rank(y);
    if (rx !== ry || rx === 2) return rx - ry || a - b;
    let c: number;
    if (rx === 0) c = Number(x) - Number(y);
    else c = (typeof x === "object" ? JSON.stringify(x) : String(x)).localeCompare(typeof y === "object" ? JSON.stringify(y) : String(y));
    return (descending ? -c : c) || a - b;
  });
}

/** Where a result row names a step (columns `episode_id` and `step`), the indexes of those
 * two columns, so the grid can show the step's screenshot; else null. */
export function stepColumns(names: string[]): [number, number] | null {
  const episode = names.indexOf("episode_id");
  const step = names.indexOf("step");
  return episode >= 0 && step >= 0 ? [episode, step] : null;
}

const HISTORY_KEY = "elake.sql.history";
export const HISTORY_MAX = 20;

/** The queries run in this browser, newest first, without repeats. */
export function remember(history: string[], query: string): string[] {
  const q = query.trim();
  return q ? [q, ...history.filter((h) => h !== q)].slice(0, HISTORY_MAX) : history;
}

export function loadHistory(): string[] {
  try {
    const stored = JSON.parse(localStorage.getItem(HISTORY_KEY) ?? "[]");
    return Array.isArray(stored) ? stored.filter((q): q is string => typeof q === "string") : [];
  } catch {
    return [];
  }
}

export function saveHistory(history: string[]): void {
  localStorage.setItem(HISTORY_KEY, JSON.stringify(history));
}

/** The identifier being typed at `cursor`: where it starts and what it is so far. */
export function wordBefore(text: string, cursor: number): { start: number; word: string } {
  let start = cursor;
  while (start > 0 && /[A-Za-z0-9_]/.test(text[start - 1])) start--;
  return { start, word: text.slice(start, cursor) };
}

/** Table and column names that complete `word` (any case), tables first, each once, at
 * most `limit`; nothing for an empty word or one already whole. */
export function completions(word: string, tables: { name: string; columns: { name: string }[] }[], limit = 8): string[] {
  if (!word) return [];
  const lower = word.toLowerCase();
  const names = [...tables.map((t) => t.name), ...tables.flatMap((t) => t.columns.map((c) => c.name))];
  const out = [...new Set(names)].filter((n) => n.toLowerCase().startsWith(lower) && n.toLowerCase() !== lower);
  return out.slice(0, limit);
}
