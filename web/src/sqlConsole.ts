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

/** A query run in this browser, and whether it failed (kept too: a failing query is the one
 * most worth fixing and running again). */
export interface HistoryEntry {
  query: string;
  failed: boolean;
}

/** The queries run in this browser, newest first, without repeats; a query run again takes
 * its latest outcome. */
export function remember(history: HistoryEntry[], query: string, failed = false): HistoryEntry[] {
  const q = query.trim();
  return q ? [{ query: q, failed }, ...history.filter((h) => h.query !== q)].slice(0, HISTORY_MAX) : history;
}

export function loadHistory(): HistoryEntry[] {
  try {
    const stored = JSON.parse(localStorage.getItem(HISTORY_KEY) ?? "[]");
    if (!Array.isArray(stored)) return [];
    // entries of earlier builds were the query's text alone (all of them had succeeded)
    return stored
      .map((h) => (typeof h === "string" ? { query: h, failed: false } : h))
      .filter((h): h is HistoryEntry => typeof h?.query === "string")
      .map((h) => ({ query: h.query, failed: h.failed === true }));
  } catch {
    return [];
  }
}

export function saveHistory(history: HistoryEntry[]): void {
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

// Charting a result: a column along x (numbers on a scale, anything else as categories) and a
// column of numbers up, as bars or a line.

/** A result column as a chart sees it. */
export interface ResultColumn {
  name: string;
  type: string;
}

export type ChartKind = "bar" | "line";

const NUMBER_TYPE = /^(TINYINT|SMALLINT|INTEGER|INT|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|FLOAT|REAL|DOUBLE|DECIMAL|NUMERIC)\b/i;

const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/** Whether column `i` holds numbers: its SQL type is a number type, or (a type the console
 * does not know) every value in it is a number, at least one. */
export function isNumberColumn(columns: ResultColumn[], rows: unknown[][], i: number): boolean {
  if (NUMBER_TYPE.test(columns[i]?.type ?? "")) return true;
  let seen = false;
  for (const row of rows) {
    const v = row[i];
    if (v === null || v === undefined) continue;
    if (!isNumber(v)) return false;
    seen = true;
  }
  return seen;
}

/** Which columns a chart can use: any column along x, only columns of numbers up (y). */
export function chartableColumns(columns: ResultColumn[], rows: unknown[][]): { x: number[]; y: number[] } {
  const all = columns.map((_, i) => i);
  return { x: all, y: all.filter((i) => isNumberColumn(columns, rows, i)) };
}

/** The columns charted for the names asked (from the address): each name if the result has
 * it (a column of numbers for y), else the first choice: along x the first column that is
 * not numbers (categories: task, policy version), else the first column; up the first
 * column of numbers other than x. Null when the result has no column of numbers. */
export function chartColumns(columns: ResultColumn[], rows: unknown[][], xName?: string | null, yName?: string | null): { x: number; y: number } | null {
  const { y: numbers } = chartableColumns(columns, rows);
  if (numbers.length === 0) return null;
  const named = (name: string | null | undefined, among: number[]) => {
    const i = name ? columns.findIndex((c) => c.name === name) : -1;
    return among.includes(i) ? i : -1;
  };
  let x = named(xName, columns.map((_, i) => i));
  if (x < 0) {
    const text = columns.findIndex((_, i) => !numbers.includes(i));
    x = text >= 0 ? text : 0;
  }
  let y = named(yName, numbers);
  if (y < 0) y = numbers.find((i) => i !== x) ?? numbers[0];
  return { x, y };
}

/** What a chart draws: x values (numbers, or text labels drawn evenly as categories) and the
 * y value at each (null where a row's value is not a number: a gap). */
export interface ChartSeries {
  x: number[] | string[];
  values: (number | null)[];
  /** Whether x is drawn as categories (text, dates, booleans: anything but numbers). */
  categories: boolean;
  /** Rows left out: a NULL x on a number scale has no place. */
  dropped: number;
}

/** The series for x column `x` and y column `y`. Numbers along x are sorted by value (a line
 * runs left to right; rows without an x are left out); any other x is each row's value as
 * text, a category, in the result's order (NULL as "NULL"). */
export function chartSeries(columns: ResultColumn[], rows: unknown[][], x: number, y: number): ChartSeries {
  const yOf = (row: unknown[]) => (isNumber(row[y]) ? (row[y] as number) : null);
  if (isNumberColumn(columns, rows, x)) {
    const kept = rows.filter((r) => isNumber(r[x])).sort((a, b) => (a[x] as number) - (b[x] as number));
    return { x: kept.map((r) => r[x] as number), values: kept.map(yOf), categories: false, dropped: rows.length - kept.length };
  }
  const label = (v: unknown) => (v === null || v === undefined ? "NULL" : typeof v === "object" ? JSON.stringify(v) : String(v));
  return { x: rows.map((r) => label(r[x])), values: rows.map(yOf), categories: true, dropped: 0 };
}
