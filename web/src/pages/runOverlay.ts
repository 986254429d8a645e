// The Training page's overlay of runs: its plain arithmetic, unit-tested.

/** A trailing moving average over `window` iterations (1: the values as they are). Nulls
 * are skipped, and an iteration without a value stays null (no line is drawn through it). */
export function smooth(values: (number | null)[], window: number): (number | null)[] {
  if (window <= 1) return values;
  return values.map((v, i) => {
    if (v === null) return null;
    const seen = values.slice(Math.max(0, i - window + 1), i + 1).filter((w): w is number => w !== null);
    return seen.reduce((a, b) => a + b, 0) / seen.length;
  });
}

/** Several runs' values of one metric on one x axis: the union of their iterations, each
 * run null where it did not record that iteration. */
export function align(runs: { iterations: number[]; values: (number | null)[] }[]): { x: number[]; values: (number | null)[][] } {
  const x = [...new Set(runs.flatMap((r) => r.iterations))].sort((a, b) => a - b);
  const values = runs.map((r) => {
    const at = new Map(r.iterations.map((it, k) => [it, r.values[k] ?? null]));
    return x.map((it) => at.get(it) ?? null);
  });
  return { x, values };
}

type Config = Record<string, unknown>;

/** The settings whose values are not the same in every run (missing counts as a value),
 * sorted by name, each with its value per run as text. */
export function configDiff(configs: Config[]): { key: string; values: string[] }[] {
  const keys = [...new Set(configs.flatMap((c) => Object.keys(c)))].sort();
  const text = (v: unknown) => (v === undefined ? "—" : typeof v === "object" ? JSON.stringify(v) : String(v));
  return keys
    .map((key) => ({ key, values: configs.map((c) => text(c[key])) }))
    .filter((row) => new Set(row.values).size > 1);
}

/** The overlaid runs in the page's address (`?overlay=a,b`), and back. */
export function overlayFromQuery(q: URLSearchParams): string[] {
  return (q.get("overlay") ?? "").split(",").map((s) => s.trim()).filter(Boolean);
}
