// A query's rows as a virtualised grid: only the rows in view (and a few more) are in the
// page, so 10,000 rows scroll like 20. Columns are sized once from their header and first
// rows, cells stay on one line (full text in the tooltip), and the grid scrolls both ways
// under a sticky header. A header click sorts by its column (again: the other way). Rows
// that name a step (columns episode_id and step) begin with its screenshot, linked to the
// replay. ARIA table roles keep it a table for screen readers.
import { useVirtualizer } from "@tanstack/react-virtual";
import { useMemo, useRef, useState } from "react";
import type { SqlResult } from "../api/client";
import { Link, enc } from "../router";
import { sortRows, stepColumns } from "../sqlConsole";

const ROW_HEIGHT = 26;
const SHOT_ROW_HEIGHT = 64;
const SHOT_COL = 48;
const CHAR_PX = 7.5;
const MIN_COL = 72;
const MAX_COL = 420;
const SAMPLE_ROWS = 200;

type Cell = SqlResult["rows"][number][number];

export function cellText(v: Cell): string {
  if (v === null || v === undefined) return "NULL";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

function columnWidths(result: SqlResult): number[] {
  return result.columns.map((c, i) => {
    let chars = Math.max(c.name.length, 4);
    for (const row of result.rows.slice(0, SAMPLE_ROWS)) chars = Math.max(chars, cellText(row[i]).length);
    return Math.round(Math.min(MAX_COL, Math.max(MIN_COL, chars * CHAR_PX + 18)));
  });
}

export function ResultGrid({ result }: { result: SqlResult }) {
  const scroller = useRef<HTMLDivElement>(null);
  const [sort, setSort] = useState<{ column: number; descending: boolean } | null>(null);
  const order = useMemo(
    () => (sort ? sortRows(result.rows, sort.column, sort.descending) : result.rows.map((_, i) => i)),
    [result, sort],
  );
  const shots = stepColumns(result.columns.map((c) => c.name));
  const height = shots ? SHOT_ROW_HEIGHT : ROW_HEIGHT;
  const widths = useMemo(() => [...(shots ? [SHOT_COL] : []), ...columnWidths(result)], [result, shots]);
  const template = widths.map((w) => `${w}px`).join(" ");
  const width = widths.reduce((a, b) => a + b, 0);
  const rows = useVirtualizer({ count: result.rows.length, getScrollElement: () => scroller.current, estimateSize: () => height, overscan: 12 });
  const sortBy = (column: number) =>
    setSort((s) => (s?.column === column ? { column, descending: !s.descending } : { column, descending: false }));
  return (
    <div className="result-scroll" ref={scroller} data-testid="sql-scroll" tabIndex={0} aria-label="query results">
      <div role="table" className="result-grid" data-testid="sql-results" aria-rowcount={result.rows.length + 1} aria-colcount={result.columns.length} style={{ width }}>
        <div role="rowgroup" className="result-head">
          <div role="row" aria-rowindex={1} className="result-row" style={{ gridTemplateColumns: template }}>
            {shots && (
              <div role="columnheader" className="shot-head">
                <span className="sr-only">screenshot</span>
              </div>
            )}
            {result.columns.map((c, i) => {
              const sorted = sort?.column === i ? (sort.descending ? "descending" : "ascending") : "none";
              return (
                <div role="columnheader" key={i} aria-sort={sorted}>
                  <button type="button" className="sort" title={`${c.name}: ${c.type}; click to sort`} onClick={() => sortBy(i)}>
                    {c.name}
                    {sorted === "ascending" ? " ▲" : sorted === "descending" ? " ▼" : ""}
                  </button>
                </div>
              );
            })}
          </div>
        </div>
        <div role="rowgroup" className="result-body" style={{ height: rows.getTotalSize() }}>
          {rows.getVirtualItems().map((item) => {
            const row = result.rows[order[item.index]];
            return (
            <div
              role="row"
              aria-rowindex={item.index + 2}
              key={item.key}
              className="result-row"
              style={{ gridTemplateColumns: template, height, transform: `translateY(${item.start}px)` }}
            >
              {shots && <ShotCell episode={row[shots[0]]} step={row[shots[1]]} />}
              {row.map((v, i) => {
                const text = cellText(v);
                return (
                  <div role="cell" key={i} className={v === null ? "null" : undefined} title={text.length > 20 ? text : undefined}>
                    {text}
                  </div>
                );
              })}
            </div>
            );
          })}
        </div>
      </div>
    </div>
  );
}

/** A row's step as a small screenshot linking to its replay (nothing when the row's values
 * are not an episode id and a step number). */
function ShotCell({ episode, step }: { episode: Cell; step: Cell }) {
  if (typeof episode !== "string" || typeof step !== "number") return <div role="cell" />;
  return (
    <div role="cell" className="shot-cell">
      <Link to={`/episodes/${enc(episode)}/steps/${step}`} title={`${episode} step ${step}`}>
        <img src={`/api/episodes/${enc(episode)}/steps/${step}/image?max_side=120`} alt={`${episode} step ${step}`} loading="lazy" height={SHOT_ROW_HEIGHT - 6} />
      </Link>
    </div>
  );
}
