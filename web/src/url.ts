// URL state that is plain string work: kept apart from the router so it can be unit-tested.

/** Paths with the current query string kept (filters travel with the user). */
export function withQuery(path: string, query: URLSearchParams): string {
  const q = query.toString();
  return q ? `${path}?${q}` : path;
}

/** A path segment from an id (episode ids may hold `:` or `/`). */
export const enc = encodeURIComponent;
