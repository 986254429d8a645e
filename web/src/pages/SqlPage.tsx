// /sql?q=...: read-only SQL over the lake (the server's sandbox refuses writes and file
// access and caps rows and time); results in a virtualised grid, and the same query as a
// CSV or Parquet download. Ctrl+Enter runs.
import { useEffect, useState } from "react";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { queries } from "../api/queries";
import { ResultGrid } from "../components/ResultGrid";
import { ActionError, Loading } from "../components/Status";
import { useTitle } from "../hooks";
import { navigate, useLocation } from "../router";
import { elapsedText, SQL_TABLES, sqlFailure } from "../sqlConsole";

const EXAMPLE = `select task_name, policy_version, count(*) as episodes, avg(success::int) as success_rate
from episodes group by all order by all`;

const download = (query: string, format: "csv" | "parquet") => `/api/sql/download?format=${format}&query=${encodeURIComponent(query)}`;

export function SqlPage() {
  const { query } = useLocation();
  const urlQuery = query.get("q");
  const [text, setText] = useState(urlQuery ?? EXAMPLE);
  // The URL's query runs (Run navigates to it; back and forward show earlier results at once).
  const sql = useQuery({ ...queries.sql(urlQuery ?? ""), enabled: !!urlQuery });
  useTitle("SQL");
  const submit = () => {
    if (text === urlQuery) void sql.refetch();
    else navigate(`/sql?q=${encodeURIComponent(text)}`);
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
      <label htmlFor="sql-input">SQL query</label>
      <p className="muted" id="sql-help">
        Tables: {SQL_TABLES.map((t) => (t === "steps" ? "steps (image bytes only when named)" : t)).join(", ")}. One SELECT; read-only.
      </p>
      <textarea
        id="sql-input"
        aria-describedby="sql-help"
        value={text}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) submit();
        }}
        rows={6}
        spellCheck={false}
        data-testid="sql-input"
      />
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
          <ResultGrid result={r} />
        </>
      )}
    </main>
  );
}
