// The landing view beside the task tree: success rate by policy version of each run, the latest
// collection runs, the failure categories curated most and the sets changed last, from
// GET /api/overview. Every row links to the episodes, set or view behind it.
import { useQuery } from "@tanstack/react-query";
import type { Schemas } from "../api/client";
import { queries } from "../api/queries";
import { pct } from "../components/JobState";
import { ListTable } from "../components/ListTable";
import { Async } from "../components/Status";
import { Time, count } from "../components/Time";
import { Link, enc } from "../router";

type Overview = Schemas["Overview"];

function Bar({ rate, label }: { rate: number | null | undefined; label: string }) {
  return (
    <span className="bar-cell" role="img" aria-label={label}>
      <span className="bar-fill" style={{ width: `${Math.round(100 * (rate ?? 0))}%` }} />
    </span>
  );
}

/** The episodes of one policy version of one run (a version is its run's: other runs'
 * versions of the same name are other policies). */
function policyHref(p: Overview["success_by_policy"][number]): string {
  const q = new URLSearchParams();
  if (p.run_id) q.set("run_id", p.run_id);
  if (p.policy_version) q.set("policy_version", p.policy_version);
  return q.size ? `/?${q}` : "/";
}

export function OverviewPage() {
  const overview = useQuery(queries.overview());
  return (
    <main className="empty-state overview" data-testid="overview">
      <h1>Overview</h1>
      <Async state={overview} what="the overview">
        {(o: Overview) => (
          <>
            <p className="muted">
              {count(o.episodes, "episode")} · {count(o.steps, "step")} · pick a task on the left to replay its episodes. Keys: A/D or ←/→ step · O overlay · Z
              zoom · 1-5 failure category · F failing step · Esc leaves a text box
            </p>
            <div className="overview-grid">
              <section aria-labelledby="ov-policy">
                <h2 id="ov-policy">Success rate by policy version</h2>
                <ListTable
                  testid="overview-policies"
                  columns={["policy version", "run", "success", "episodes"]}
                  items={o.success_by_policy}
                  row={(p) => (
                    <tr key={`${p.run_id ?? ""}\u0000${p.policy_version ?? ""}`}>
                      <td>
                        <Link to={policyHref(p)}>{p.policy_version ?? "(none)"}</Link>
                      </td>
                      <td className="mono">{p.run_id ? <Link to={`/?run_id=${enc(p.run_id)}`}>{p.run_id}</Link> : "(none)"}</td>
                      <td className="rate-cell">
                        <Bar rate={p.success_rate} label={`${pct(p.success_rate)} success`} /> {pct(p.success_rate)}
                      </td>
                      <td>
                        {p.successes}/{p.episodes}
                      </td>
                    </tr>
                  )}
                  empty="No episodes yet."
                />
                <p>
                  <Link to="/stats">Per task in Stats</Link>
                </p>
              </section>
              <section aria-labelledby="ov-runs">
                <h2 id="ov-runs">Latest runs</h2>
                <ListTable
                  testid="overview-runs"
                  columns={["run", "episodes", "success", "policies", "last episode"]}
                  items={o.latest_runs}
                  row={(r) => (
                    <tr key={r.run_id ?? ""}>
                      <td className="mono">{r.run_id ? <Link to={`/?run_id=${enc(r.run_id)}`}>{r.run_id}</Link> : "(none)"}</td>
                      <td>{r.episodes}</td>
                      <td>{pct(r.success_rate)}</td>
                      <td>{r.policy_versions.join(", ") || "—"}</td>
                      <td>
                        <Time value={r.last_episode_at} />
                      </td>
                    </tr>
                  )}
                  empty="No episodes yet."
                />
                <p>
                  <Link to="/training">Training runs</Link> · <Link to="/reruns">Re-runs</Link>
                </p>
              </section>
              <section aria-labelledby="ov-categories">
                <h2 id="ov-categories">Biggest failure categories</h2>
                <ListTable
                  testid="overview-categories"
                  columns={["category", "episodes", "sets"]}
                  items={o.failure_categories}
                  row={(c) => (
                    <tr key={c.failure_category ?? ""}>
                      <td>{c.failure_category ?? "no category"}</td>
                      <td className="rate-cell">
                        <Bar rate={c.members / Math.max(1, ...o.failure_categories.map((x) => x.members))} label={`${c.members} episodes`} /> {c.members}
                      </td>
                      <td>{c.sets}</td>
                    </tr>
                  )}
                  empty="Nothing curated yet: open an episode and press 1-5."
                />
              </section>
              <section aria-labelledby="ov-sets">
                <h2 id="ov-sets">Recent sets</h2>
                <ListTable
                  testid="overview-sets"
                  columns={["set", "kind", "members", "updated"]}
                  items={o.recent_sets}
                  row={(s) => (
                    <tr key={s.set_id}>
                      <td>
                        <Link to={`/sets/${enc(s.set_id)}`}>{s.name}</Link>
                      </td>
                      <td>{s.kind}</td>
                      <td>{s.members}</td>
                      <td>
                        <Time value={s.updated_at} />
                      </td>
                    </tr>
                  )}
                  empty="No sets yet."
                />
                <p>
                  <Link to="/sets">All sets</Link>
                </p>
              </section>
            </div>
          </>
        )}
      </Async>
    </main>
  );
}
