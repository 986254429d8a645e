// A list as a `grid` table: the list pages (sets, groups, exports, re-runs, training runs)
// and their detail pages all show rows of one kind under a row of column names.
import type { ReactNode } from "react";

/** One `row(item)` per item under the `columns` names ("" for a column without one);
 * `empty`, when given, fills a full-width row while there are no items. */
export function ListTable<T>({ columns, items, row, empty, testid }: { columns: string[]; items: T[]; row: (item: T) => ReactNode; empty?: ReactNode; testid?: string }) {
  return (
    <table className="grid" data-testid={testid}>
      <thead>
        <tr>
          {columns.map((c, i) => (
            <th key={i}>{c}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {items.map(row)}
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
}
