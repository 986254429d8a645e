// /sql?q=...: read-only SQL over the lake (the server's sandbox refuses writes and file
// access and caps rows and time); results in a virtualised grid, and the same query as a
// CSV or Parquet download. Ctrl+Enter runs.
import { useEffect, useState } from "react";
import { api, call, type SqlResult } from "../api/client";
import { ResultGrid } from "../components/ResultGrid";
import { ActionError, Loading } from "../components/Status";
import { useTitle } from "../hooks";
import { navigate, useLocation } from "../router";

const EXAMPLE = `select task_name, policy_version, count(*) as episodes, avg(success::int) as success_rate
from episodes group by all order by all`;

const download = (query: string, format: "csv" | "parquet") => `/api/sql/download?format=${format}&query=${encodeURIComponent(query)}`;

export function SqlPage() {
  const { query } = useLocation();
  const urlQuery = query.get("q");
  const [text, setText] = useState(urlQuery ?? EXAMPLE);
  const [result, setResult] = useState<{ query: string; data: SqlResult }>();
  const [error, setError] = useState<string>();
  const [running, setRunning] = useState(false);
  useTitle("SQL");
  const run = async (q: string) => {
    setRunning(true);
    setError(undefined);
    try {
      setResult({ query: q, data: await call(api.POST("/api/sql", { body: { query: q } })) });
    } catch (e) {
      setResult(undefined);
      setError(`The query failed: ${(e as Error).message}`);
    } finally {
      setRunning(false);
    }
  };
  useEffect(() => {
    if (urlQuery) void run(urlQuery);
  }, [urlQuery]); // runs whenever the URL's query changes (Run navigates to it)
  const submit = () => {
    if (text === urlQuery) void run(text);
    else navigate(`/sql?q=${encodeURIComponent(text)}`);
  };
  const r = result?.data;
  return (
    <main className="page sql" data-testid="sql-page">
      <h2>SQL</h2>
      <label htmlFor="sql-input">SQL query</label>
      <p className="muted" id="sql-help">
        Tables: episodes, steps (image bytes only when named), sets, set_members, annotations, exports, runs. One SELECT; read-only.
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
        {result && (
          <>
            <a href={download(result.query, "csv")} download>
              Download CSV
            </a>
            <a href={download(result.query, "parquet")} download>
              Download Parquet
            </a>
          </>
        )}
      </div>
      {running && <Loading what="results" />}
      <ActionError message={error} />
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
