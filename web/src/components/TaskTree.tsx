// The left panel: tasks with counts and success rates; a task opens into its episodes
// (paged by cursor), each marked success ✓, failure ✗ or unjudged ?. A lake of many tasks
// draws only the tasks in view (@tanstack/react-virtual).
import { useEffect, useLayoutEffect, useRef, useState, type ReactNode } from "react";
import { useVirtualizer } from "@tanstack/react-virtual";
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import type { EpisodeQuery, TaskNode } from "../api/client";
import { queries } from "../api/queries";
import { Link, enc, useLocation, withQuery } from "../router";
import { filtersFromQuery } from "./filters";
import { VIRTUAL_FROM } from "./ListTable";
import { Async } from "./Status";
import { count } from "./Time";

const TASK_ROW_ESTIMATE = 34;

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
  const task = (t: TaskNode) => {
    const name = t.task_name ?? "(no task)";
    return (
      <>
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
      </>
    );
  };
  return (
    <nav className="task-tree" data-testid="task-tree" aria-label="tasks">
      <Async state={tasks} what="tasks">
        {(list: TaskNode[]) =>
          list.length === 0 ? (
            <p className="muted">No episodes match.</p>
          ) : list.length > VIRTUAL_FROM ? (
            <LongTaskList list={list} render={task} current={currentTask} />
          ) : (
            <ul>
              {list.map((t) => (
                <li key={t.task_name ?? "(no task)"} className="task">
                  {task(t)}
                </li>
              ))}
            </ul>
          )
        }
      </Async>
    </nav>
  );
}

/** Many tasks: only those in view (and a few more) are in the page; the panel the tree sits
 * in scrolls, and the list is padded to its full height. An open task, with its episodes, is
 * one taller row. */
function LongTaskList({ list, render, current }: { list: TaskNode[]; render: (t: TaskNode) => ReactNode; current?: string | null }) {
  const ul = useRef<HTMLUListElement>(null);
  const [margin, setMargin] = useState(0);
  // The panel's scroller holds the filters above the tree: their height is where the list starts.
  useLayoutEffect(() => {
    const scroller = ul.current?.closest(".left");
    if (!ul.current || !scroller) return;
    const measure = () => setMargin(ul.current!.getBoundingClientRect().top - scroller.getBoundingClientRect().top + scroller.scrollTop);
    measure();
    const observer = new ResizeObserver(measure);
    for (const child of scroller.children) observer.observe(child);
    return () => observer.disconnect();
  }, []);
  const rows = useVirtualizer({
    count: list.length,
    getScrollElement: () => ul.current?.closest(".left") ?? null,
    estimateSize: () => TASK_ROW_ESTIMATE,
    overscan: 10,
    scrollMargin: margin,
    getItemKey: (i) => list[i].task_name ?? "(no task)",
  });
  // The replay's task is scrolled into view when the page opens on it.
  const target = list.findIndex((t) => t.task_name === current);
  useEffect(() => {
    if (target >= 0) rows.scrollToIndex(target, { align: "auto" });
  }, [target, rows]);
  const visible = rows.getVirtualItems();
  const above = visible.length ? visible[0].start - margin : 0;
  const below = visible.length ? rows.getTotalSize() - (visible[visible.length - 1].end - margin) : 0;
  return (
    <ul ref={ul} style={{ paddingTop: above, paddingBottom: below }}>
      {visible.map((v) => (
        <li key={v.key} ref={rows.measureElement} data-index={v.index} className="task" aria-setsize={list.length} aria-posinset={v.index + 1}>
          {render(list[v.index])}
        </li>
      ))}
    </ul>
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
