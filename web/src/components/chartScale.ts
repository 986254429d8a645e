// The y scale of the app's bar charts, apart from uPlot so it can be tested without a canvas.

/** The y range of bars: each bar grows from 0 (uPlot fills a bar to 0), up for a positive
 * value and down for a negative one, so the range holds 0 and both ends of the data. Without
 * negatives it starts at 0 and reaches at least 1, so all-zero (or no) data still has a
 * scale to draw on. */
export function barRange(dataMin: number | null, dataMax: number | null): [number, number] {
  const low = Math.min(0, dataMin ?? 0);
  const high = Math.max(0, dataMax ?? 0);
  return low < 0 ? [low, high] : [0, Math.max(1, high)];
}
