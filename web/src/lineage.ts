// Links from what was produced (an export, a training run) to the episodes it read: the
// episode list filtered by a condition over the lake's `lineage` table (lake/ops/lineage.py),
// so "which episodes made this" is one click and the same SQL anyone can run.

const quote = (text: string) => `'${text.replaceAll("'", "''")}'`;

/** The episode filter condition: episodes recorded as read by `output` (an export id). */
export function readByOutput(output: string): string {
  return `episode_id IN (SELECT unnest(episode_ids) FROM lineage WHERE output = ${quote(output)})`;
}

/** The same for every checkpoint of a training run. */
export function readByRun(runId: string): string {
  return `episode_id IN (SELECT unnest(episode_ids) FROM lineage WHERE run_id = ${quote(runId)})`;
}

/** The overview's episode list under `condition`. */
export function episodesWhere(condition: string): string {
  return `/?where=${encodeURIComponent(condition)}`;
}
