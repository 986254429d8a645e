// A query's rows as a virtualised grid: only the rows in view (and a few more) are in the
// page, so 10,000 rows scroll like 20. Columns are sized once from their header and first
// rows, cells stay on one line (full text in the tooltip), and the grid scrolls both ways
// under a sticky header. ARIA table roles keep it a table for screen readers.
import { useVirtualizer } from "@tanstack/react-virtual";
import { useMemo, useRef } from "react";
import type { SqlResult } from "../api/client";

const ROW_HEIGHT = 26;
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
  const widths = useMemo(() => columnWidths(result), [result]);
  const template = widths.map((w) => `${w}px`).join(" ");
  const width = widths.reduce((a, b) => a + b, 0);
  const rows = useVirtualizer({ count: result.rows.length, getScrollElement: () => scroller.current, estimateSize: () => ROW_HEIGHT, overscan: 12 });
  return (
    <div className="result-scroll" ref={scroller} data-testid="sql-scroll" tabIndex={0} aria-label="query results">
      <div role="table" className="result-grid" data-testid="sql-results" aria-rowcount={result.rows.length + 1} aria-colcount={result.columns.length} style={{ width }}>
        <div role="rowgroup" className="result-head">
          <div role="row" aria-rowindex={1} className="result-row" style={{ gridTemplateColumns: template }}>
            {result.columns.map((c, i) => (
              <div role="columnheader" key={i} title={`${c.name}: ${c.type}`}>
                {c.name}
              </div>
            ))}
          </div>
        </div>
        <div role="rowgroup" className="result-body" style={{ height: rows.getTotalSize() }}>
          {rows.getVirtualItems().map((item) => (
            <div
              role="row"
              aria-rowindex={item.index + 2}
              key={item.key}
              className="result-row"
              style={{ gridTemplateColumns: template, height: ROW_HEIGHT, transform: `translateY(${item.start}px)` }}
            >
              {result.rows[item.index].map((v, i) => {
                const text = cellText(v);
                return (
                  <div role="cell" key={i} className={v === null ? "null" : undefined} title={text.length > 20 ? text : undefined}>
                    {text}
                  </div>
                );
              })}
            </div>
          ))}
        </div>
      </div>
    </div>
  );
}
