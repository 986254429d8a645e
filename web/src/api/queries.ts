// Every read the app makes, as TanStack Query options over the typed client. Each key starts
// with its resource, so a write invalidates exactly what it changed, the live poller
// refreshes what lists episodes, and two views asking the same thing (the replay and
// Compare, the curation panel and the Sets page) share one cached answer.
import { QueryClient, infiniteQueryOptions, queryOptions, type QueryKey } from "@tanstack/react-query";
import { api, call, type BranchJob, type EpisodeQuery, type ExportSummary, type RerunSummary, type SearchQuery } from "./client";

/** Most lake data changes only by a write: this client's own (which invalidates what it
 * changed) or another's (which the live poller sees by the list's ETag and turns into an
 * invalidation). So an answer stays fresh for a while: views opened again, or an episode
 * revisited, render from the cache at once instead of refetching on every mount, and a
 * step switch, which changes no key, never asks the server for anything but images. */
const FRESH_MS = 30_000;

export const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      staleTime: FRESH_MS,
      // The live poller already notices changes made while the tab was in the background.
      refetchOnWindowFocus: false,
      // A failed read shows at once, with a Retry button where trying again can help (see
      // ErrorBox); an unreachable server shows as Offline in the top bar.
      retry: false,
    },
  },
});

/** Keys of the data other writers change while a view is open: recorders (episode lists,
 * details and queues, tasks, groups, stats, the overview), a training run (its curves) and
 * teammates (sets and their members, saved views and queues, saved queries, people, the
 * audit log, the exports and re-runs they start). A new ETag from the live poll refetches those on screen; the rest go
 * stale. */
export const LIVE_KEYS: QueryKey[] = [
  ["tasks"], ["episodes"], ["episode"], ["queue"], ["overview"], ["groups"], ["stats"],
  ["runs"], ["run"],
  ["sets"], ["views"], ["audit"], ["exports"], ["reruns"], ["sql-saved"], ["users"],
];

/** Refetches the active queries under `keys` (and marks the inactive ones stale). */
export function invalidate(...keys: QueryKey[]): Promise<void> {
  return Promise.all(keys.map((queryKey) => queryClient.invalidateQueries({ queryKey }))).then(() => undefined);
}

/** Job lists and jobs follow a running job every second, and stop once none runs. A job
 * changes by the server's own work, not by a write this client could invalidate, so its
 * answers are never fresh: a list opened again after a job's page saw it finish asks at
 * once instead of showing the "running" it cached when the job started. */
const JOB_POLL_MS = 1000;
const JOB_FRESH_MS = 0;
const whileRunning = (running: boolean) => (running ? JOB_POLL_MS : false);

const TREE_PAGE = 50;

export const queries = {
  tasks: (filters: EpisodeQuery) =>
    queryOptions({ queryKey: ["tasks", filters], queryFn: ({ signal }) => call(api.GET("/api/tasks", { params: { query: filters }, signal })) }),
  episodes: (query: EpisodeQuery) =>
    queryOptions({ queryKey: ["episodes", query], queryFn: ({ signal }) => call(api.GET("/api/episodes", { params: { query }, signal })) }),
  /** A task's episodes in the tree, paged by the list's cursor ("more…" loads the next page). */
  taskEpisodes: (task: string, filters: EpisodeQuery) =>
    infiniteQueryOptions({
      queryKey: ["episodes", { ...filters, task, limit: TREE_PAGE }, "pages"],
      queryFn: ({ pageParam, signal }) =>
        call(api.GET("/api/episodes", { params: { query: { ...filters, task, limit: TREE_PAGE, cursor: pageParam } }, signal })),
      initialPageParam: undefined as string | undefined,
      getNextPageParam: (page) => page.next_cursor ?? undefined,
    }),
  episode: (id: string) =>
    queryOptions({
      queryKey: ["episode", id],
      queryFn: ({ signal }) => call(api.GET("/api/episodes/{episode_id}", { params: { path: { episode_id: id } }, signal })),
    }),
  queue: (id: string, filters: EpisodeQuery) =>
    queryOptions({
      queryKey: ["queue", id, filters],
      queryFn: ({ signal }) => call(api.GET("/api/episodes/{episode_id}/queue", { params: { path: { episode_id: id }, query: filters }, signal })),
    }),
  overview: () => queryOptions({ queryKey: ["overview"], queryFn: ({ signal }) => call(api.GET("/api/overview", { signal })) }),
  stats: (filters: EpisodeQuery) =>
    queryOptions({ queryKey: ["stats", filters], queryFn: ({ signal }) => call(api.GET("/api/stats", { params: { query: filters }, signal })) }),
  sets: () => queryOptions({ queryKey: ["sets"], queryFn: ({ signal }) => call(api.GET("/api/sets", { signal })) }),
  set: (id: string) =>
    queryOptions({ queryKey: ["sets", id], queryFn: ({ signal }) => call(api.GET("/api/sets/{set_id}", { params: { path: { set_id: id } }, signal })) }),
  members: (id: string) =>
    queryOptions({
      queryKey: ["sets", id, "members"],
      queryFn: ({ signal }) => call(api.GET("/api/sets/{set_id}/members", { params: { path: { set_id: id } }, signal })),
    }),
  views: () => queryOptions({ queryKey: ["views"], queryFn: ({ signal }) => call(api.GET("/api/views", { signal })) }),
  view: (id: string) =>
    queryOptions({ queryKey: ["views", id], queryFn: ({ signal }) => call(api.GET("/api/views/{view_id}", { params: { path: { view_id: id } }, signal })) }),
  groups: () => queryOptions({ queryKey: ["groups"], queryFn: ({ signal }) => call(api.GET("/api/groups", { signal })) }),
  group: (id: string) =>
    queryOptions({ queryKey: ["groups", id], queryFn: ({ signal }) => call(api.GET("/api/groups/{group_id}", { params: { path: { group_id: id } }, signal })) }),
  trainRuns: () =>
    queryOptions({ queryKey: ["runs", "train"], queryFn: ({ signal }) => call(api.GET("/api/runs", { params: { query: { kind: "train" } }, signal })) }),
  /** Training runs grouped by their settings but the seed: a metric's mean and interval. */
  runsOverSeeds: (metric: string) =>
    queryOptions({
      queryKey: ["runs", "over-seeds", metric],
      queryFn: ({ signal }) => call(api.GET("/api/runs/over-seeds", { params: { query: { metric } }, signal })),
    }),
  run: (id: string) =>
    queryOptions({ queryKey: ["run", id], queryFn: ({ signal }) => call(api.GET("/api/runs/{run_id}", { params: { path: { run_id: id } }, signal })) }),
  /** A read-only query's result (POST only for the query's length); Run asks again. */
  sql: (query: string) =>
    queryOptions({ queryKey: ["sql", query], queryFn: ({ signal }) => call(api.POST("/api/sql", { body: { query }, signal })) }),
  /** Full-text hits over screen text, thinking, responses and goals, of all episodes or one. */
  search: (query: SearchQuery) =>
    queryOptions({ queryKey: ["search", query], queryFn: ({ signal }) => call(api.GET("/api/search", { params: { query }, signal })) }),
  /** How many screenshots' text is read (OCR), so "nothing matched" can say whether it was looked at. */
  searchCoverage: () =>
    queryOptions({ queryKey: ["search", "coverage"], queryFn: ({ signal }) => call(api.GET("/api/search/coverage", { signal })), staleTime: 30_000 }),
  /** The steps whose screenshots look most like this step's, from any episode. */
  similar: (episodeId: string, step: number, k: number) =>
    queryOptions({
      queryKey: ["similar", episodeId, step, k],
      queryFn: ({ signal }) =>
        call(api.GET("/api/episodes/{episode_id}/steps/{step}/similar", { params: { path: { episode_id: episodeId, step }, query: { k } }, signal })),
    }),
  /** What the redaction preview (`image?redact=1`) masks on a step's screenshot, and by which rule. */
  redaction: (episodeId: string, step: number) =>
    queryOptions({
      queryKey: ["redaction", episodeId, step],
      queryFn: ({ signal }) => call(api.GET("/api/episodes/{episode_id}/steps/{step}/redaction", { params: { path: { episode_id: episodeId, step } }, signal })),
    }),
  health: () => queryOptions({ queryKey: ["health"], queryFn: ({ signal }) => call(api.GET("/api/health", { signal })) }),
  /** The tables a SQL query can name, with their columns (the console's schema browser). */
  sqlTables: () =>
    queryOptions({ queryKey: ["sql-tables"], staleTime: Infinity, queryFn: ({ signal }) => call(api.GET("/api/sql/tables", { signal })) }),
  /** Who the server takes this browser for (a signed-in person, or anyone on a server that needs no token). */
  me: () => queryOptions({ queryKey: ["me"], staleTime: 60_000, queryFn: ({ signal }) => call(api.GET("/api/me", { signal })) }),
  /** The team's saved SQL queries, each with its owner. */
  savedQueries: () => queryOptions({ queryKey: ["sql-saved"], queryFn: ({ signal }) => call(api.GET("/api/sql/saved", { signal })) }),
  /** The lake's people (names and roles), to assign a set to one. */
  users: () => queryOptions({ queryKey: ["users"], staleTime: 60_000, queryFn: ({ signal }) => call(api.GET("/api/users", { signal })) }),
  /** The audit log's newest changes, optionally of one row (a set, a member `SET/EPISODE`). */
  audit: (targetId?: string) =>
    queryOptions({
      queryKey: ["audit", targetId ?? null],
      queryFn: ({ signal }) => call(api.GET("/api/audit", { params: { query: { target_id: targetId, limit: 20 } }, signal })),
    }),
  // The server's formats are fixed while it runs.
  exportFormats: () =>
    queryOptions({ queryKey: ["export-formats"], staleTime: Infinity, queryFn: ({ signal }) => call(api.GET("/api/export-formats", { signal })) }),
  exports: () =>
    queryOptions({
      queryKey: ["exports"],
      staleTime: JOB_FRESH_MS,
      queryFn: ({ signal }) => call(api.GET("/api/exports", { signal })),
      refetchInterval: (q) => whileRunning(q.state.data?.some((e: ExportSummary) => e.status === "running") ?? false),
    }),
  reruns: () =>
    queryOptions({
      queryKey: ["reruns"],
      staleTime: JOB_FRESH_MS,
      queryFn: ({ signal }) => call(api.GET("/api/reruns", { signal })),
      refetchInterval: (q) => whileRunning(q.state.data?.some((r: RerunSummary) => r.status === "running") ?? false),
    }),
  // Under ["episode", id]: the live poll refreshes it when a branch is recorded elsewhere.
  branches: (id: string) =>
    queryOptions({
      queryKey: ["episode", id, "branches"],
      staleTime: JOB_FRESH_MS,
      queryFn: ({ signal }) => call(api.GET("/api/episodes/{episode_id}/branches", { params: { path: { episode_id: id } }, signal })),
      refetchInterval: (q) => whileRunning(q.state.data?.jobs.some((j: BranchJob) => j.status === "running" || j.status === "queued") ?? false),
    }),
  rerun: (id: string) =>
    queryOptions({
      queryKey: ["reruns", id],
      staleTime: JOB_FRESH_MS,
      queryFn: ({ signal }) => call(api.GET("/api/reruns/{rerun_id}", { params: { path: { rerun_id: id } }, signal })),
      refetchInterval: (q) => whileRunning(q.state.data?.status === "running"),
    }),
};
