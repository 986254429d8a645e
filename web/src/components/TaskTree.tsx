// The left panel: tasks with counts and success rates; a task opens into its episodes
// (paged by cursor), each marked success ✓, failure ✗ or unjudged ?.
import { useEffect, useState } from "react";
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import type { EpisodeQuery, TaskNode } from "../api/client";
import { queries } from "../api/queries";
import { Link, enc, useLocation, withQuery } from "../router";
import { filtersFromQuery } from "./filters";
import { Async } from "./Status";
import { count } from "./Time";

export function mark(success: boolean | null | undefined): string {
  return success === true ? "✓" : success === false ? "✗" : "?";
}

export function TaskTree({ currentEpisode, currentTask }: { currentEpisode?: string; currentTask?: string | null }) {
  const { query } = useLocation();
  const filters = filtersFromQuery(query);
  const tasks = useQuery(queries.tasks(filters));
  const [open, setOpen] = useState<Set<string>>(new Set());
  useEffect(() => {
    if (currentTask) setOpen((o) => (o.has(currentTask) ? o : new Set(o).add(currentTask)));
  }, [currentTask]);
  const toggle = (t: string) =>
    setOpen((o) => {
      const n = new Set(o);
      if (n.has(t)) n.delete(t);
      else n.add(t);
      return n;
    });
  return (
    <nav className="task-tree" data-testid="task-tree" aria-label="tasks">
      <Async state={tasks} what="tasks">
        {(list: TaskNode[]) =>
          list.length === 0 ? (
            <p className="muted">No episodes match.</p>
          ) : (
            <ul>
              {list.map((t) => {
                const name = t.task_name ?? "(no task)";
                return (
                  <li key={name} className="task">
                    <button
                      type="button"
                      className="task-row"
                      onClick={() => toggle(name)}
                      title={t.task_goal ? `${name}: ${t.task_goal}` : name}
                      aria-expanded={open.has(name)}
                    >
                      <span className="caret">{open.has(name) ? "▾" : "▸"}</span>
                      <span className="task-name">{name}</span>
                      <span className="counts">
                        <span className="ok">{t.successes}✓</span> <span className="bad">{t.failures}✗</span>
                        {t.unjudged > 0 && <span> {t.unjudged}?</span>}
                      </span>
                      <span className="rate" style={{ ["--rate" as string]: `${(t.success_rate ?? 0) * 100}%` }} />
                    </button>
                    {open.has(name) && t.task_name && <TaskEpisodes task={t.task_name} filters={filters} current={currentEpisode} />}
                  </li>
                );
              })}
            </ul>
          )
        }
      </Async>
    </nav>
  );
}

function TaskEpisodes({ task, filters, current }: { task: string; filters: EpisodeQuery; current?: string }) {
  const { query } = useLocation();
  const list = useInfiniteQuery(queries.taskEpisodes(task, filters));
  return (
    <Async state={list} what="episodes">
      {(pages) => {
        const items = pages.pages.flatMap((p) => p.items);
        return (
          <ul className="episodes">
            {items.map((e) => (
              <li key={e.episode_id} className={e.episode_id === current ? "current" : ""}>
                <Link to={withQuery(`/episodes/${enc(e.episode_id)}/steps/0`, query)} data-episode={e.episode_id}>
                  <span className={`mark ${e.success === true ? "ok" : e.success === false ? "bad" : ""}`}>{mark(e.success)}</span>
                  <span className="mono episode-id" title={e.episode_id}>
                    {e.episode_id}
                  </span>
                  <span className="muted">
                    {count(e.episode_length, "step")}
                    {e.policy_version && <span title="policy version"> · {e.policy_version}</span>}
                  </span>
                </Link>
              </li>
            ))}
            {list.hasNextPage && (
              <li>
                <button type="button" className="link" onClick={() => void list.fetchNextPage()} disabled={list.isFetchingNextPage}>
                  more…
                </button>
              </li>
            )}
          </ul>
        );
      }}
    </Async>
  );
}
