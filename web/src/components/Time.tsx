// Timestamps for people: "3 Jan 2026, 10:04" in the browser's time zone; the exact ISO time
// (microseconds, zone) stays in the element's title and datetime attribute.
const FORMAT = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const WITH_SECONDS = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

export function formatTime(iso: string, seconds = false): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : (seconds ? WITH_SECONDS : FORMAT).format(d);
}

export function Time({ value, seconds = false }: { value: string | null | undefined; seconds?: boolean }) {
  if (!value) return <>—</>;
  return (
    <time dateTime={value} title={value}>
      {formatTime(value, seconds)}
    </time>
  );
}

/** "1 step", "4 steps". */
export function count(n: number | null | undefined, noun: string, plural = `${noun}s`): string {
  return n == null ? `? ${plural}` : `${n} ${n === 1 ? noun : plural}`;
}
