// The left panel: tasks with counts and success rates; a task opens into its episodes
// (paged by cursor), each marked success ✓, failure ✗ or unjudged ?. A lake of many tasks
// draws only the tasks in view (@tanstack/react-virtual). A curator ticks episodes (shift-click
// for a range, across open tasks in the order shown) and files them into a set together.
import { Fragment, useCallback, useEffect, useLayoutEffect, useReducer, useRef, useState, type ReactNode } from "react";
import { useVirtualizer } from "@tanstack/react-virtual";
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import type { Episode, EpisodeQuery, TaskNode } from "../api/client";
import { queries } from "../api/queries";
import { Link, enc, useLocation, withQuery } from "../router";
import { filtersFromQuery } from "./filters";
import { VIRTUAL_FROM } from "./ListTable";
import { useMay } from "./Role";
import { SelectionBar } from "./SelectionBar";
import { TickBox } from "./TickBox";
import { NONE_TICKED, tick, type Ticked } from "./selection";
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
  const { ticking, tree } = useTicking(tasks.data, open);
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
          <span className="task-name">{breakable(name)}</span>
          <span className="counts">
            <span className="ok">{t.successes}✓</span> <span className="bad">{t.failures}✗</span>
            {t.unjudged > 0 && <span> {t.unjudged}?</span>}
          </span>
          <span className="rate" style={{ ["--rate" as string]: `${(t.success_rate ?? 0) * 100}%` }} />
        </button>
        {open.has(name) && t.task_name && <TaskEpisodes task={t.task_name} filters={filters} current={currentEpisode} ticking={ticking} />}
      </>
    );
  };
  return (
    <nav ref={tree} className="task-tree" data-testid="task-tree" aria-label="tasks">
      {ticking && ticking.ticked.ids.size > 0 && (
        <SelectionBar episodes={[...ticking.ticked.ids]} hidden={ticking.hidden} onClear={ticking.clear} />
      )}
      <Async state={tasks} what="tasks">
        {(list: TaskNode[]) =>
          list.length === 0 ? (
            <p className="muted">No episodes match.</p>
          ) : list.length > VIRTUAL_FROM ? (
            <PanelList
              items={list}
              itemKey={(t) => t.task_name ?? "(no task)"}
              estimate={TASK_ROW_ESTIMATE}
              render={task}
              itemClass={() => "task"}
              scrollTo={list.findIndex((t) => t.task_name === currentTask)}
            />
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

/** What an episode row needs to be ticked; absent for a role that may not curate. */
interface Ticking {
  ticked: Ticked;
  onTick: (episode: string, shift: boolean) => void;
  /** An open task's episodes as drawn (or fetched again), in order. */
  onShown: (task: string, episodes: string[]) => void;
  clear: () => void;
  /** Ticked episodes not in the list as drawn now (their task closed, or filtered out). */
  hidden: number;
}

/** The tree's ticked episodes. A shift-click's range runs through the open tasks' episodes
 * in the order drawn; a task scrolled out of a long tree keeps its last list, so a range
 * may span it. Only a curator ticks: ticking is for filing into sets. */
function useTicking(tasks: TaskNode[] | undefined, open: ReadonlySet<string>) {
  const may = useMay();
  const tree = useRef<HTMLElement>(null);
  const [ticked, setTicked] = useState<Ticked>(NONE_TICKED);
  const shown = useRef(new Map<string, string[]>());
  // A task's list arrives after the tree drew it: drawing again then keeps `hidden` true.
  const [, redraw] = useReducer((n: number) => n + 1, 0);
  const onShown = useCallback((task: string, episodes: string[]) => {
    const before = shown.current.get(task);
    shown.current.set(task, episodes);
    if (!before || before.length !== episodes.length || before.some((e, i) => e !== episodes[i])) redraw();
  }, []);
  const order = (tasks ?? []).flatMap((t) => (t.task_name && open.has(t.task_name) ? (shown.current.get(t.task_name) ?? []) : []));
  const onTick = (episode: string, shift: boolean) => setTicked((before) => tick(order, before, episode, shift));
  const drawn = new Set(order);
  const hidden = [...ticked.ids].filter((id) => !drawn.has(id)).length;
  // The bar (and the button that cleared it) goes: focus returns to the last ticked box
  // rather than to the page's start.
  const clear = () => {
    const boxes = tree.current?.querySelectorAll<HTMLInputElement>("input.tick");
    const last = [...(boxes ?? [])].find((b) => b.dataset.tick === ticked.anchor) ?? boxes?.[0];
    setTicked(NONE_TICKED);
    last?.focus();
  };
  const ticking: Ticking | undefined = may("curator") ? { ticked, onTick, onShown, clear, hidden } : undefined;
  return { ticking, tree };
}

/** A long list in the tree: only its items in view (and a few more) are in the page; the
 * panel the tree sits in scrolls, and the list is padded to its full height. An open task,
 * with its episodes (paged by "more…"), is one taller item. */
function PanelList<T>({ items, itemKey, estimate, render, className, itemClass, scrollTo }: {
  items: T[];
  itemKey: (item: T) => string;
  estimate: number;
  render: (item: T) => ReactNode;
  className?: string;
  itemClass?: (item: T) => string;
  /** An item to scroll into view when it changes (the replay's task). */
  scrollTo?: number;
}) {
  const ul = useRef<HTMLUListElement>(null);
  const [margin, setMargin] = useState(0);
  // Where the list starts in the panel's scrolled content: below the filters. It moves as
  // they change size, and is read again then and on scrolling (cheap, and it only updates
  // when it moved).
  useLayoutEffect(() => {
    const scroller = ul.current?.closest(".left");
    if (!ul.current || !scroller) return;
    const measure = () => {
      const top = ul.current!.getBoundingClientRect().top - scroller.getBoundingClientRect().top + scroller.scrollTop;
      setMargin((m) => (Math.abs(m - top) < 1 ? m : top));
    };
    measure();
    const observer = new ResizeObserver(measure);
    for (const child of scroller.children) observer.observe(child);
    scroller.addEventListener("scroll", measure, { passive: true });
    return () => {
      observer.disconnect();
      scroller.removeEventListener("scroll", measure);
    };
  }, []);
  const scroller = () => ul.current?.closest<HTMLElement>(".left") ?? null;
  const rows = useVirtualizer({
    count: items.length,
    getScrollElement: scroller,
    // The panel may be scrolled already (the filters changed the tasks past the limit):
    // start from there, or the new list would scroll the panel back to the top.
    initialOffset: () => scroller()?.scrollTop ?? 0,
    estimateSize: () => estimate,
    overscan: 10,
    scrollMargin: margin,
    getItemKey: (i) => itemKey(items[i]),
  });
  useEffect(() => {
    if (scrollTo !== undefined && scrollTo >= 0) rows.scrollToIndex(scrollTo, { align: "auto" });
  }, [scrollTo, rows]);
  const visible = rows.getVirtualItems();
  const above = visible.length ? visible[0].start - margin : 0;
  const below = visible.length ? rows.getTotalSize() - (visible[visible.length - 1].end - margin) : 0;
  return (
    <ul ref={ul} className={className} style={{ paddingTop: above, paddingBottom: below }}>
      {visible.map((v) => (
        <li key={v.key} ref={rows.measureElement} data-index={v.index} className={itemClass?.(items[v.index])} aria-setsize={items.length} aria-posinset={v.index + 1}>
          {render(items[v.index])}
        </li>
      ))}
    </ul>
  );
}

/** A task name that wraps only after its separators (`send_message` as `send_` `message`),
 * never inside a word. */
export function breakable(name: string) {
  return name.split(/(?<=[_\-./:])/).map((part, i) => (
    <Fragment key={i}>
      {i > 0 && <wbr />}
      {part}
    </Fragment>
  ));
}

function TaskEpisodes({ task, filters, current, ticking }: { task: string; filters: EpisodeQuery; current?: string; ticking?: Ticking }) {
  const { query } = useLocation();
  const list = useInfiniteQuery(queries.taskEpisodes(task, filters));
  const onShown = ticking?.onShown;
  useEffect(() => {
    if (list.data) onShown?.(task, list.data.pages.flatMap((p) => p.items.map((e) => e.episode_id)));
  }, [list.data, task, onShown]);
  return (
    <Async state={list} what="episodes">
      {(pages) => {
        const items = pages.pages.flatMap((p) => p.items);
        const more = list.hasNextPage && (
          <button type="button" className="link" onClick={() => void list.fetchNextPage()} disabled={list.isFetchingNextPage}>
            more…
          </button>
        );
        const episode = (e: Episode) => (
          <Link to={withQuery(`/episodes/${enc(e.episode_id)}/steps/0`, query)} data-episode={e.episode_id}>
            <span className={`mark ${e.success === true ? "ok" : e.success === false ? "bad" : ""}`}>{mark(e.success)}</span>
            <span className="mono episode-id" title={e.episode_id}>
              {e.episode_id}
            </span>
            <span className="muted">
              {count(e.episode_length, "step")}
              {e.policy_version && <span title="the policy version that ran it"> · policy {e.policy_version}</span>}
            </span>
          </Link>
        );
        const mine = (e: Episode) => (e.episode_id === current ? "current" : "");
        return (
          <ul className="episodes">
            {items.map((e) => (
              <li key={e.episode_id} className={mine(e)}>
                {ticking && <TickBox ticked={ticking.ticked} onTick={ticking.onTick} episode={e.episode_id} />}
                {episode(e)}
              </li>
            ))}
            {more && <li>{more}</li>}
          </ul>
        );
      }}
    </Async>
  );
}
