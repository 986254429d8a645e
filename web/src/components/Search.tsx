// Search from anywhere (press /), as you type: episodes by id, task or goal text (GET
// /api/episodes?search=...), then steps whose screen text, thinking or raw response (or
// whose episode's goal) hold every word (GET /api/search), each with its snippet and the
// matched words marked. Enter opens the highlighted row: an episode, its search as a filter
// of the task tree, or a step in the replay with the words found there (see Found.tsx).
import { useEffect, useId, useRef, useState, type KeyboardEvent as ReactKeyboardEvent } from "react";
import { keepPreviousData, useQuery } from "@tanstack/react-query";
import type { SearchHit } from "../api/client";
import { queries } from "../api/queries";
import { isShortcut } from "../hooks";
import { enc, navigate } from "../router";
import { FIND, Highlighted } from "./Found";
import { mark } from "./TaskTree";
import { count } from "./Time";

const SHOWN = 8;
/** Text hits added by each "more" row, up to the API's cap. */
const MORE = 40;
const MOST = 1000;
const FIELD_LABELS: Record<string, string> = { screen: "screen", thinking: "thinking", response: "response", goal: "goal" };

/** Where a text hit opens: its step (the episode's first for a goal), with the words to find. */
function hitPath(hit: SearchHit, words: string): string {
  const at = hit.step === null || hit.step === undefined ? "" : `/steps/${hit.step}`;
  return `/episodes/${enc(hit.episode_id)}${at}?${FIND}=${enc(words)}`;
}
const DEBOUNCE_MS = 120;

export function Search() {
  const input = useRef<HTMLInputElement>(null);
  const list = useId();
  const [text, setText] = useState("");
  const [settled, setSettled] = useState(""); // the text once typing pauses for DEBOUNCE_MS
  // The highlighted row, by what it shows (so a list that reloads under it keeps it), and
  // by place for a row that is gone (the first new hit after "more", the top after new words).
  const [pointed, setPointed] = useState<{ key: string | null; index: number }>({ key: null, index: 0 });
  const [open, setOpen] = useState(false);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== "/" || !isShortcut(e)) return;
      e.preventDefault();
      input.current?.focus();
      input.current?.select();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
  useEffect(() => {
    const timer = window.setTimeout(() => setSettled(text.trim()), DEBOUNCE_MS);
    return () => window.clearTimeout(timer);
  }, [text]);
  // The last matches stay listed while the next ones load.
  const search = useQuery({ ...queries.episodes({ search: settled, limit: SHOWN }), enabled: settled !== "", placeholderData: keepPreviousData });
  const [textLimit, setTextLimit] = useState(SHOWN);
  useEffect(() => setTextLimit(SHOWN), [settled]);
  const textSearch = useQuery({ ...queries.search({ q: settled, limit: textLimit }), enabled: settled !== "", placeholderData: keepPreviousData });
  const page = search.isError ? { items: [], total: 0 } : search.data;
  const found = text.trim() && settled && page ? { for: settled, items: page.items, total: page.total ?? null } : undefined;
  const items = found?.items ?? [];
  // A query the text search refuses (no word in it) simply finds no text.
  const hits = found && !textSearch.isError && textSearch.data ? textSearch.data : [];
  // With no hits, whether the screens' text has been read at all ("nothing matched" or "not read yet").
  const coverage = useQuery({ ...queries.searchCoverage(), enabled: found !== undefined && !textSearch.isFetching && hits.length === 0 });
  const unread = coverage.data && coverage.data.pending > 0 ? coverage.data : null;
  const filterRow = found && items.length ? 1 : 0;
  const moreRow = hits.length === textLimit && textLimit < MOST ? 1 : 0;
  // the episodes, "all as a filter", the text hits, "more"
  const keys = [
    ...items.map((e) => `episode ${e.episode_id}`),
    ...(filterRow ? ["filter"] : []),
    ...hits.map((h) => `hit ${h.episode_id}/${h.step}/${h.field}`),
    ...(moreRow ? ["more"] : []),
  ];
  const rows = keys.length;
  const kept = pointed.key === null ? -1 : keys.indexOf(pointed.key);
  const active = kept >= 0 ? kept : pointed.key === null ? Math.min(pointed.index, Math.max(0, rows - 1)) : 0;
  useEffect(() => setPointed((p) => ({ key: p.key, index: 0 })), [settled]);
  const choose = (i: number) => {
    if (!found || i >= rows) return;
    if (moreRow && i === rows - 1) {
      setTextLimit((l) => Math.min(MOST, l + MORE));
      setPointed({ key: null, index: i });
      return;
    }
    setOpen(false);
    input.current?.blur();
    if (i < items.length) navigate(`/episodes/${enc(items[i].episode_id)}/steps/0`);
    else if (i < items.length + filterRow) navigate(`/?search=${enc(found.for)}`);
    else navigate(hitPath(hits[i - items.length - filterRow], found.for));
  };
  const onKeyDown = (e: ReactKeyboardEvent<HTMLInputElement>) => {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      setOpen(true);
      if (rows) {
        const next = (active + (e.key === "ArrowDown" ? 1 : rows - 1)) % rows;
        setPointed({ key: keys[next], index: next });
      }
    } else if (e.key === "Enter" && rows) {
      e.preventDefault();
      choose(active);
    } else if (e.key === "Escape") {
      setOpen(false);
    }
  };
  const shown = open && found !== undefined && text.trim() !== "";
  const optionId = (i: number) => `${list}-${i}`;
  useEffect(() => {
    if (shown) document.getElementById(optionId(active))?.scrollIntoView({ block: "nearest" });
  });
  return (
    <div className="search" data-testid="search">
      <input
        ref={input}
        type="search"
        role="combobox"
        aria-label="Search episodes by id, task or goal, and the text on screens and in the reasoning (press /)"
        aria-expanded={shown}
        aria-controls={list}
        aria-autocomplete="list"
        aria-activedescendant={shown && rows ? optionId(active) : undefined}
        placeholder="Search episodes and screens  /"
        value={text}
        onChange={(e) => {
          setText(e.target.value);
          setOpen(true);
        }}
        onFocus={() => setOpen(true)}
        onBlur={() => window.setTimeout(() => setOpen(false), 150)}
        onKeyDown={onKeyDown}
      />
      {shown && (
        <div id={list} role="listbox" className="search-results" aria-label="search results">
          <div role="group" aria-label="episodes">
            <div className="search-group" aria-hidden="true">
              Episodes
            </div>
            {items.length === 0 ? (
              <div className="muted" role="option" aria-selected={false} aria-disabled>
                No episode matches “{found.for}”.
              </div>
            ) : (
              <>
                {items.map((e, i) => (
                  <div
                    key={e.episode_id}
                    id={optionId(i)}
                    role="option"
                    aria-selected={i === active}
                    data-episode={e.episode_id}
                    onMouseDown={(ev) => ev.preventDefault()}
                    onClick={() => choose(i)}
                  >
                    <span className={`mark ${e.success ? "ok" : e.success === false ? "bad" : ""}`}>{mark(e.success)}</span>
                    <span className="mono">{e.episode_id}</span> <span>{e.task_name}</span>
                    <span className="muted"> · {count(e.episode_length, "step")}</span>
                    {e.task_goal && <div className="muted goal-line">{e.task_goal}</div>}
                  </div>
                ))}
                <div id={optionId(items.length)} role="option" aria-selected={active === items.length} onMouseDown={(ev) => ev.preventDefault()} onClick={() => choose(items.length)}>
                  All {found.total ?? ""} matches as a filter
                </div>
              </>
            )}
          </div>
          <div role="group" aria-label="text on screens and in the reasoning" data-testid="text-hits">
            <div className="search-group" aria-hidden="true">
              Screens and reasoning
            </div>
            {hits.length === 0 ? (
              <div className="muted" role="option" aria-selected={false} aria-disabled>
                {textSearch.isFetching ? "Searching the text…" : `No screen text, thinking, response or goal holds “${found.for}”.`}
                {!textSearch.isFetching && unread && (
                  <div data-testid="unread-screens">
                    The text of {count(unread.pending, "screenshot")} of {unread.screenshots} is not read yet, so not searched: {unread.how}.
                  </div>
                )}
              </div>
            ) : (
              <>
                {hits.map((h, j) => {
                  const i = items.length + filterRow + j;
                  return (
                    <div
                      key={`${h.episode_id}/${h.step}/${h.field}`}
                      id={optionId(i)}
                      role="option"
                      aria-selected={i === active}
                      data-hit-episode={h.episode_id}
                      data-hit-step={h.step ?? undefined}
                      data-hit-field={h.field}
                      onMouseDown={(ev) => ev.preventDefault()}
                      onClick={() => choose(i)}
                    >
                      <span className={`hit-field hit-${h.field}`}>{FIELD_LABELS[h.field] ?? h.field}</span> <span className="mono">{h.episode_id}</span>
                      {h.step !== null && h.step !== undefined && <> · step {h.step}</>}
                      {h.task_name && <span className="muted"> · {h.task_name}</span>}
                      <div className="hit-snippet">
                        <Highlighted text={h.snippet} terms={h.terms} />
                      </div>
                    </div>
                  );
                })}
                {moreRow > 0 && (
                  <div id={optionId(rows - 1)} role="option" aria-selected={active === rows - 1} data-testid="more-text-hits" onMouseDown={(ev) => ev.preventDefault()} onClick={() => choose(rows - 1)}>
                    {textSearch.isFetching ? "Loading more…" : `More text matches (showing ${hits.length})`}
                  </div>
                )}
              </>
            )}
          </div>
        </div>
      )}
    </div>
  );
}
