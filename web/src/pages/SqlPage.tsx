// /sql?q=...: read-only SQL over the lake (the server's sandbox refuses writes and file
// access and caps rows and time); results in a virtualised grid (click a header to sort;
// rows naming an episode's step show its screenshot), and the same query as a CSV or
// Parquet download. Ctrl+Enter runs. A chart of the result (bars or a line, x and y columns
// picked; `chart=`, `x=`, `y=` in the address) shows above the grid. Beside it, the tables
// and their columns (a click inserts the name) and this browser's last queries.
import { useEffect, useLayoutEffect, useRef, useState } from "react";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { queries } from "../api/queries";
import { ResultChart, type ChartChoice } from "../components/ResultChart";
import { ResultGrid } from "../components/ResultGrid";
import { SavedQueries } from "../components/SavedQueries";
import { ActionError, Loading } from "../components/Status";
import { useTitle } from "../hooks";
import { navigate, useLocation } from "../router";
import { completions, elapsedText, loadHistory, remember, saveHistory, sqlFailure, wordBefore, type ChartKind } from "../sqlConsole";

const EXAMPLE = `select task_name, policy_version, count(*) as episodes, avg(success::int) as success_rate
from episodes group by all order by all`;

const download = (query: string, format: "csv" | "parquet") => `/api/sql/download?format=${format}&query=${encodeURIComponent(query)}`;

/** The console's address: the query and the chart asked for (kept when another query runs). */
function sqlUrl(q: string, chart: ChartChoice): string {
  let url = `/sql?q=${encodeURIComponent(q)}`;
  if (chart.kind) {
    url += `&chart=${chart.kind}`;
    if (chart.x) url += `&x=${encodeURIComponent(chart.x)}`;
    if (chart.y) url += `&y=${encodeURIComponent(chart.y)}`;
  }
  return url;
}

export function SqlPage() {
  const { query } = useLocation();
  const urlQuery = query.get("q");
  const kind = query.get("chart");
  const chart: ChartChoice = {
    kind: kind === "bar" || kind === "line" ? (kind as ChartKind) : null,
    x: query.get("x"),
    y: query.get("y"),
  };
  const [text, setText] = useState(urlQuery ?? EXAMPLE);
  // The URL's query runs (Run navigates to it; back and forward show earlier results at once).
  const sql = useQuery({ ...queries.sql(urlQuery ?? ""), enabled: !!urlQuery });
  const tables = useQuery(queries.sqlTables());
  const [history, setHistory] = useState(loadHistory);
  // Every query run is kept, a failed one too (marked): it is the one most worth fixing.
  useEffect(() => {
    if (!urlQuery || (!sql.data && !sql.error) || sql.isFetching) return;
    const failed = sql.isError;
    setHistory((h) => {
      const next = remember(h, urlQuery, failed);
      saveHistory(next);
      return next;
    });
  }, [urlQuery, sql.data, sql.error, sql.isFetching, sql.isError]);
  const editor = useRef<HTMLTextAreaElement>(null);
  // Completion of the word at the cursor from the tables' and columns' names: Tab takes the
  // first, a click any; Escape (or moving on) hides them.
  const [caret, setCaret] = useState<number | null>(null);
  const typed = caret === null ? null : wordBefore(text, caret);
  const suggestions = typed ? completions(typed.word, tables.data ?? []) : [];
  // Where the caret goes after a completion or an insertion: placed in a layout effect, right
  // after the new text is in the box and before the next key can land (a frame later, a key
  // typed meanwhile would be moved back to the old place).
  const caretAfter = useRef<number | null>(null);
  useLayoutEffect(() => {
    const at = caretAfter.current;
    if (at === null) return;
    caretAfter.current = null;
    editor.current?.focus();
    editor.current?.setSelectionRange(at, at);
  }, [text]);
  const complete = (name: string) => {
    if (!typed) return;
    caretAfter.current = typed.start + name.length;
    setText(text.slice(0, typed.start) + name + text.slice(caret ?? typed.start));
    setCaret(null);
  };
  const insert = (name: string) => {
    const box = editor.current;
    const at = box ? box.selectionStart : text.length;
    const end = box ? box.selectionEnd : text.length;
    caretAfter.current = at + name.length;
    setText(text.slice(0, at) + name + text.slice(end));
  };
  useTitle("SQL");
  const submit = () => {
    if (text === urlQuery) void sql.refetch();
    else navigate(sqlUrl(text, chart));
  };
  const r = sql.isError ? undefined : sql.data;
  const running = sql.isFetching;
  const client = useQueryClient();
  const [elapsed, setElapsed] = useState(0);
  const [cancelled, setCancelled] = useState(false);
  useEffect(() => {
    if (!running) return;
    setCancelled(false);
    const started = Date.now();
    setElapsed(0);
    const tick = setInterval(() => setElapsed(Date.now() - started), 100);
    return () => clearInterval(tick);
  }, [running]);
  // Cancelling stops waiting (the request is aborted); the server ends the query at its time limit.
  const cancel = () => {
    setCancelled(true);
    void client.cancelQueries({ queryKey: queries.sql(urlQuery ?? "").queryKey });
  };
  return (
    <main className="page sql" data-testid="sql-page">
      <h2>SQL</h2>
      <div className="sql-layout">
      <div className="sql-main">
      <label htmlFor="sql-input">SQL query</label>
      <p className="muted" id="sql-help">
        One SELECT over the tables listed beside; read-only. Image columns are read only when a query names them.
      </p>
      <textarea
        ref={editor}
        id="sql-input"
        aria-describedby="sql-help"
        value={text}
        onChange={(e) => {
          setText(e.target.value);
          setCaret(e.target.selectionStart === e.target.selectionEnd ? e.target.selectionStart : null);
        }}
        onKeyDown={(e) => {
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) submit();
          else if (e.key === "Tab" && suggestions.length > 0) {
            e.preventDefault();
            complete(suggestions[0]);
          } else if (e.key === "Escape" || e.key === "ArrowUp" || e.key === "ArrowDown") setCaret(null);
        }}
        onBlur={() => setTimeout(() => setCaret(null), 200)}
        aria-autocomplete="list"
        aria-controls="sql-suggestions"
        rows={6}
        spellCheck={false}
        data-testid="sql-input"
      />
      <ul id="sql-suggestions" className="sql-suggestions" data-testid="sql-suggestions" aria-label="completions (Tab takes the first)">
        {suggestions.map((name) => (
          <li key={name}>
            <button type="button" className="link mono" onMouseDown={(e) => e.preventDefault()} onClick={() => complete(name)}>
              {name}
            </button>
          </li>
        ))}
      </ul>
      <div className="inline-form">
        <button type="button" onClick={submit} disabled={running}>
          Run (Ctrl+Enter)
        </button>
        {running && (
          <>
            <button type="button" onClick={cancel} data-testid="sql-cancel">
              Cancel
            </button>
            <span className="muted" role="timer" data-testid="sql-timer">
              running {elapsedText(elapsed)}
            </span>
          </>
        )}
        {r && urlQuery && (
          <>
            <a href={download(urlQuery, "csv")} download>
              Download CSV
            </a>
            <a href={download(urlQuery, "parquet")} download>
              Download Parquet
            </a>
          </>
        )}
      </div>
      {running && <Loading what="results" />}
      {cancelled && !running && <p className="muted" role="status" data-testid="sql-cancelled">Cancelled: the results were not waited for.</p>}
      <ActionError message={sql.error && !cancelled ? `The query failed: ${sqlFailure(sql.error)}` : undefined} />
      {r && (
        <>
          <p className="muted" role="status">
            {r.rows.length} rows{r.truncated ? ` (cut at the ${r.truncated_by === "bytes" ? "size" : "row"} cap; downloads are cut at the same caps)` : ""} · {r.elapsed_ms.toFixed(0)} ms
          </p>
          <ResultChart result={r} choice={chart} onChoose={(next) => urlQuery && navigate(sqlUrl(urlQuery, next), { replace: true })} />
          <ResultGrid result={r} />
        </>
      )}
      </div>
      <aside className="sql-side" aria-label="tables, saved queries and history">
        <h3>Tables</h3>
        <ul className="sql-tables" data-testid="sql-tables">
          {tables.data?.map((t) => (
            <li key={t.name}>
              <details>
                <summary className="mono">{t.name}</summary>
                <button type="button" className="link" onClick={() => insert(t.name)} aria-label={`insert table ${t.name}`}>
                  insert the table's name
                </button>
                <ul>
                  {t.columns.map((c) => (
                    <li key={c.name}>
                      <button type="button" className="link mono" onClick={() => insert(c.name)} aria-label={`insert column ${t.name}.${c.name}`}>
                        {c.name}
                      </button>{" "}
                      <span className="muted">{t.image_columns.includes(c.name) ? "image" : c.type}</span>
                    </li>
                  ))}
                </ul>
              </details>
            </li>
          ))}
        </ul>
        <SavedQueries current={text} onOpen={setText} />
        {history.length > 0 && (
          <>
            <h3>History</h3>
            <ol className="sql-history" data-testid="sql-history">
              {history.map((h) => (
                <li key={h.query} className={h.failed ? "failed" : undefined}>
                  <button type="button" className="link mono" title={h.query} onClick={() => setText(h.query)}>
                    {h.query.length > 80 ? `${h.query.slice(0, 80)}…` : h.query}
                  </button>
                  {h.failed && (
                    <span className="history-failed" data-testid="history-failed">
                      {" "}
                      failed
                    </span>
                  )}
                </li>
              ))}
            </ol>
          </>
        )}
      </aside>
      </div>
    </main>
  );
}
