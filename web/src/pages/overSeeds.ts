// The Training page's over-seeds view: its plain arithmetic, unit-tested.

/** An interval's end as drawn: a rate's cut to 0-1, anything else as it is. */
export function bound(v: number | null | undefined, rate: boolean): number | null {
  if (v == null) return null;
  return rate ? Math.min(1, Math.max(0, v)) : v;
}

/** What the arms' final mean covers: each run's last 5 iterations, or fewer when no run has 5. */
export function lastN(arms: { iterations: number[] }[]): string {
  const n = Math.min(5, Math.max(0, ...arms.map((a) => a.iterations.length)));
  return n === 1 ? "last iteration" : `last ${n} iterations`;
}
