// /sql?q=...: read-only SQL over the lake (the server's sandbox refuses writes and file
// access and caps rows and time); results in a grid. Ctrl+Enter runs.
import { useEffect, useState } from "react";
import { api, call, type SqlResult } from "../api/client";
import { ErrorBox, Loading } from "../components/Status";
import { navigate, useLocation } from "../router";

const EXAMPLE = `select task_name, policy_version, count(*) as episodes, avg(success::int) as success_rate
from episodes group by all order by all`;

export function SqlPage() {
  const { query } = useLocation();
  const urlQuery = query.get("q");
  const [text, setText] = useState(urlQuery ?? EXAMPLE);
  const [result, setResult] = useState<SqlResult>();
  const [error, setError] = useState<Error>();
  const [running, setRunning] = useState(false);
  const run = async (q: string) => {
    setRunning(true);
    setError(undefined);
    try {
      setResult(await call(api.POST("/api/sql", { body: { query: q } })));
    } catch (e) {
      setResult(undefined);
      setError(e as Error);
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
  return (
    <main className="page sql" data-testid="sql-page">
      <h2>SQL</h2>
      <p className="muted">Tables: episodes, steps (image bytes only when named), sets, set_members, annotations, exports, runs. One SELECT; read-only.</p>
      <textarea
        value={text}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) submit();
        }}
        rows={6}
        spellCheck={false}
        data-testid="sql-input"
      />
      <button type="button" onClick={submit} disabled={running}>
        Run (Ctrl+Enter)
      </button>
      {running && <Loading what="results" />}
      {error && <ErrorBox error={error} />}
      {result && (
        <>
          <p className="muted">
            {result.rows.length} rows{result.truncated ? ` (cut at the ${result.truncated_by === "bytes" ? "size" : "row"} cap)` : ""} · {result.elapsed_ms.toFixed(0)} ms
          </p>
          <div className="grid-wrap">
            <table className="grid" data-testid="sql-results">
              <thead>
                <tr>
                  {result.columns.map((c, i) => (
                    <th key={i} title={c.type}>
                      {c.name}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {result.rows.map((row, r) => (
                  <tr key={r}>
                    {row.map((v, i) => (
                      <td key={i}>{v === null ? <span className="muted">NULL</span> : typeof v === "object" ? JSON.stringify(v) : String(v)}</td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </main>
  );
}
