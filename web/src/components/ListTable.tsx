// A list as a `grid` table: the list pages (sets, groups, exports, re-runs, training runs)
// and their detail pages all show rows of one kind under a row of column names. A long list
// (a set of thousands of members) scrolls in a box of its own that holds only the rows in
// view and a few more (@tanstack/react-virtual), padded above and below to its full height:
// it stays a real table (a screen reader hears "row 812 of 3,001"), and Tab walks on from
// row to row, since moving focus scrolls the next rows in.
import { useVirtualizer } from "@tanstack/react-virtual";
import { cloneElement, isValidElement, useRef, type ReactNode } from "react";

/** Lists up to this long are drawn whole, in the page's own flow. */
export const VIRTUAL_FROM = 80;
const ROW_ESTIMATE = 27;

/** One `row(item)` (a `<tr>`) per item under the `columns` names ("" for a column without one);
 * `empty`, when given, fills a full-width row while there are no items; `label` names the
 * scrolling box of a long list. */
export function ListTable<T>({
  columns,
  items,
  row,
  empty,
  testid,
  label = "rows",
}: {
  columns: string[];
  items: T[];
  row: (item: T) => ReactNode;
  empty?: ReactNode;
  testid?: string;
  label?: string;
}) {
  const long = items.length > VIRTUAL_FROM;
  const scroller = useRef<HTMLDivElement>(null);
  const head = useRef<HTMLTableSectionElement>(null);
  const rows = useVirtualizer({
    count: long ? items.length : 0,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW_ESTIMATE,
    overscan: 12,
    scrollMargin: head.current?.offsetHeight ?? 0,
  });
  const table = (body: ReactNode) => (
    <table className="grid" data-testid={testid} aria-rowcount={long ? items.length + 1 : undefined}>
      <thead ref={head}>
        <tr aria-rowindex={long ? 1 : undefined}>
          {columns.map((c, i) => (
            <th key={i}>{c}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {body}
        {empty && items.length === 0 && (
          <tr>
            <td colSpan={columns.length} className="muted">
              {empty}
            </td>
          </tr>
        )}
      </tbody>
    </table>
  );
  if (!long) return table(items.map(row));

  const visible = rows.getVirtualItems();
  const margin = rows.options.scrollMargin;
  const above = visible.length ? visible[0].start - margin : 0;
  const below = visible.length ? rows.getTotalSize() - (visible[visible.length - 1].end - margin) : 0;
  const spacer = (height: number, key: string) =>
    height > 0 && (
      <tr key={key} aria-hidden="true" className="spacer" style={{ height }}>
        <td colSpan={columns.length} />
      </tr>
    );
  return (
    <div className="grid-wrap" ref={scroller} tabIndex={0} role="region" aria-label={label} data-testid={testid && `${testid}-scroll`}>
      {table([
        spacer(above, "above"),
        ...visible.map((v) => {
          const tr = row(items[v.index]);
          return isValidElement<Record<string, unknown>>(tr)
            ? cloneElement(tr, { ref: rows.measureElement, "data-index": v.index, "aria-rowindex": v.index + 2 })
            : tr;
        }),
        spacer(below, "below"),
      ])}
    </div>
  );
}
