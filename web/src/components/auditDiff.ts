// What an audit row changed, for people: the fields whose values differ between the row
// before and after, each "field: before → after". Bookkeeping columns (when, who, flags the
// action already says) are left out.

/** Columns every change rewrites or that the action names already. */
const BOOKKEEPING = new Set(["updated_at", "added_at", "created_at", "reviewed_at", "changed_at", "added_by", "created_by", "author", "removed", "deleted", "set_id", "episode_id", "view_id", "query_id", "annotation_id", "token_sha256"]);

export interface FieldChange {
  field: string;
  before: string;
  after: string;
}

function shown(v: unknown): string {
  if (v === null || v === undefined || v === "") return "—";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

/** The fields an audit row's `before` and `after` differ in (a creation: the fields it set;
 * a removal: the fields it had), in the row's own order. */
export function fieldChanges(before: Record<string, unknown> | null | undefined, after: Record<string, unknown> | null | undefined): FieldChange[] {
  const keys = [...new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})])].filter((k) => !BOOKKEEPING.has(k));
  const out: FieldChange[] = [];
  for (const k of keys) {
    const b = shown(before?.[k]);
    const a = shown(after?.[k]);
    if (b === a) continue;
    out.push({ field: k, before: before ? b : "", after: after ? a : "" });
  }
  return out;
}
