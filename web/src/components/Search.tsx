// Search by episode id, task or goal text from anywhere (press /): matches appear as you
// type (GET /api/episodes?search=...), Enter opens the highlighted one, and the last row
// applies the search as a filter to the task tree.
import { useEffect, useId, useRef, useState, type KeyboardEvent as ReactKeyboardEvent } from "react";
import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { queries } from "../api/queries";
import { isShortcut } from "../hooks";
import { enc, navigate } from "../router";
import { mark } from "./TaskTree";
import { count } from "./Time";

const SHOWN = 8;
const DEBOUNCE_MS = 120;

export function Search() {
  const input = useRef<HTMLInputElement>(null);
  const list = useId();
  const [text, setText] = useState("");
  const [settled, setSettled] = useState(""); // the text once typing pauses for DEBOUNCE_MS
  const [active, setActive] = useState(0);
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
  useEffect(() => setActive(0), [search.data]);
  const page = search.isError ? { items: [], total: 0 } : search.data;
  const found = text.trim() && settled && page ? { for: settled, items: page.items, total: page.total ?? null } : undefined;
  const items = found?.items ?? [];
  const rows = items.length + (found && items.length ? 1 : 0); // the matches, then "all as a filter"
  const choose = (i: number) => {
    if (!found) return;
    setOpen(false);
    input.current?.blur();
    if (i < items.length) navigate(`/episodes/${enc(items[i].episode_id)}/steps/0`);
    else navigate(`/?search=${enc(found.for)}`);
  };
  const onKeyDown = (e: ReactKeyboardEvent<HTMLInputElement>) => {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      setOpen(true);
      if (rows) setActive((a) => (a + (e.key === "ArrowDown" ? 1 : rows - 1)) % rows);
    } else if (e.key === "Enter" && rows) {
      e.preventDefault();
      choose(active);
    } else if (e.key === "Escape") {
      setOpen(false);
    }
  };
  const shown = open && found !== undefined && text.trim() !== "";
  const optionId = (i: number) => `${list}-${i}`;
  return (
    <div className="search" data-testid="search">
      <input
        ref={input}
        type="search"
        role="combobox"
        aria-label="Search episodes by id, task or goal (press /)"
        aria-expanded={shown}
        aria-controls={list}
        aria-autocomplete="list"
        aria-activedescendant={shown && rows ? optionId(active) : undefined}
        placeholder="Search episodes  /"
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
        <ul id={list} role="listbox" className="search-results" aria-label="matching episodes">
          {items.length === 0 ? (
            <li className="muted" role="option" aria-selected={false} aria-disabled>
              No episode matches “{found.for}”.
            </li>
          ) : (
            <>
              {items.map((e, i) => (
                <li
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
                </li>
              ))}
              <li id={optionId(items.length)} role="option" aria-selected={active === items.length} onMouseDown={(ev) => ev.preventDefault()} onClick={() => choose(items.length)}>
                All {found.total ?? ""} matches as a filter
              </li>
            </>
          )}
        </ul>
      )}
    </div>
  );
}
