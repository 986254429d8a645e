// /reruns and /reruns/<id>: regression re-runs of sets with their before/after success and
// the delta's confidence interval; one re-run's tasks, what got fixed and what broke; a form
// to re-run a set on the simulated phone (model endpoints and devices: `elake rerun`).
import { useState, type FormEvent } from "react";
import { useQuery } from "@tanstack/react-query";
import { api, call, type RerunCreate, type RerunDetail } from "../api/client";
import { invalidate, queries } from "../api/queries";
import { JobState, pct } from "../components/JobState";
import { ListTable } from "../components/ListTable";
import { Options } from "../components/Options";
import { RoleNote, useMay } from "../components/Role";
import { ActionError, Async } from "../components/Status";
import { useAction, useTitle } from "../hooks";
import { Time } from "../components/Time";
import { Link, enc, navigate } from "../router";

const POLICIES = ["oracle", "noisy", "random"] as const;
const NUMBER_FIELDS = ["n", "max_steps", "seed"] as const;

function signedPoints(x: number): string {
  return `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}`;
}

/** "+25.0 points [-3.1, +48.2]": the delta and its interval, in percentage points. */
export function delta(d: number | null | undefined, interval: number[] | null | undefined): string {
  if (d == null) return "—";
  const ci = interval && interval.length === 2 ? ` [${signedPoints(interval[0])}, ${signedPoints(interval[1])}]` : "";
  return `${signedPoints(d)} points${ci}`;
}

/** The re-run request from the form; fields left empty take the server's defaults (the
 * generated type lists defaulted fields as required, hence the cast). */
function requestFromForm(form: FormData): RerunCreate {
  const text = (name: string) => String(form.get(name) ?? "").trim();
  const policy = text("policy") === "noisy" && text("noise") ? `noisy:${text("noise")}` : text("policy");
  const body: Record<string, string | number> = { set: text("set"), policy };
  for (const name of NUMBER_FIELDS) if (text(name)) body[name] = Number(text(name));
  return body as unknown as RerunCreate;
}

export function RerunsPage() {
  const reruns = useQuery(queries.reruns());
  useTitle("Re-runs");
  const sets = useQuery(queries.sets());
  // No default: the oracle solves every task (a check of the environment, not of a model),
  // so a re-run that defaulted to it would report fixes no model made.
  const [policy, setPolicy] = useState<string>("");
  const action = useAction();
  const may = useMay();
  const start = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const body = requestFromForm(new FormData(e.currentTarget));
    action.run(async () => {
      const started = await call(api.POST("/api/reruns", { body }));
      void invalidate(["reruns"]);
      navigate(`/reruns/${enc(started.rerun_id)}`);
    });
  };
  return (
    <main className="page" data-testid="reruns-page">
      <h2>Re-runs</h2>
      <form className="inline-form" onSubmit={start} data-testid="rerun-form">
        <select name="set" required defaultValue="" aria-label="set">
          <option value="" disabled>
            set to re-run…
          </option>
          {sets.data?.map((s) => (
            <option key={s.set_id} value={s.set_id}>
              {s.name} ({s.kind}, {s.members})
            </option>
          ))}
        </select>
        <select name="policy" required value={policy} onChange={(e) => setPolicy(e.target.value)} aria-label="policy">
          <option value="" disabled>
            policy to re-run with…
          </option>
          <Options values={POLICIES} />
        </select>
        {policy === "noisy" && <input name="noise" type="number" min={0} max={1} step={0.05} placeholder="random share (0.3)" aria-label="noise" />}
        <input name="n" type="number" min={1} max={100} placeholder="episodes per task" aria-label="n" />
        <input name="max_steps" type="number" min={1} max={100} placeholder="max steps" aria-label="max_steps" />
        <input name="seed" type="number" min={0} placeholder="seed" aria-label="seed" />
        <button type="submit" disabled={action.busy || !may("curator")}>
          {action.busy ? "Starting…" : "Re-run on the simulated phone"}
        </button>
      </form>
      {!may("curator") && <RoleNote need="curator" what="Starting a re-run" testid="rerun-role-note" />}
      <ActionError message={action.error} />
      <Async state={reruns} what="re-runs">
        {(list) => (
          <ListTable
            testid="reruns"
            columns={["re-run", "set", "policy", "status", "before", "after", "delta [interval]", "fixed", "broke", "started"]}
            items={list}
            row={(r) => (
              <tr key={r.rerun_id}>
                <td>
                  <Link to={`/reruns/${enc(r.rerun_id)}`} className="mono">
                    {r.rerun_id}
                  </Link>
                </td>
                <td>{r.set?.name ?? "—"}</td>
                <td>
                  {r.policy ?? "—"} {r.n != null && <span className="muted">× {r.n}</span>} {r.env && r.env !== "sim" && <span className="muted">on {r.env}</span>}
                </td>
                <td>
                  <JobState status={r.status} progress={r.progress} error={r.error} />
                </td>
                <td>{pct(r.before)}</td>
                <td>{pct(r.after)}</td>
                <td>{delta(r.delta, r.interval)}</td>
                <td className={r.fixed ? "ok" : ""}>{r.fixed}</td>
                <td className={r.broke ? "bad" : ""}>{r.broke}</td>
                <td>
                  <Time value={r.created_at} />
                </td>
              </tr>
            )}
            empty={
              <>
                No re-runs yet: pick a set above, or run <span className="mono">elake rerun --set NAME --policy POLICY</span>.
              </>
            }
          />
        )}
      </Async>
    </main>
  );
}

type Outcome = NonNullable<RerunDetail["before"]>;

function outcome(o: Outcome | null | undefined, what = ""): string {
  if (!o) return "—";
  const judged = o.episodes - o.unjudged;
  return `${o.successes}/${judged}${what} (${pct(o.rate)})${o.unjudged ? ` +${o.unjudged} unjudged` : ""}`;
}

export function RerunPage({ id }: { id: string }) {
  const rerun = useQuery(queries.rerun(id));
  useTitle(`Re-run ${id}`);
  return (
    <main className="page" data-testid="rerun-page">
      <p>
        <Link to="/reruns">← all re-runs</Link>
      </p>
      <Async state={rerun} what="re-run">
        {(r) => (
          <>
            <h2>Re-run {r.rerun_id}</h2>
            <p>
              set {r.set?.set_id ? <Link to={`/sets/${enc(r.set.set_id)}`}>{r.set.name}</Link> : "—"}
              {r.set?.pinned_tag && <span className="muted"> (pinned at tag {r.set.pinned_tag})</span>}
              {r.spec && (
                <span className="muted">
                  {" "}
                  · policy {String(r.spec.policy)} × {String(r.spec.n)} on {String(r.spec.env)}
                </span>
              )}{" "}
              · <JobState status={r.status} progress={r.progress} error={r.error} />
            </p>
            {r.status === "finished" && (
              <dl className="kv headline" data-testid="rerun-numbers">
                <dt>before</dt>
                <dd>{outcome(r.before, " of the set's recorded episodes")}</dd>
                <dt>after</dt>
                <dd>
                  {outcome(r.after, " re-run episodes")}
                  {r.spec && <span className="muted"> ({String(r.spec.n)} per task)</span>}
                </dd>
                <dt>delta</dt>
                <dd>
                  {delta(r.delta, r.interval)}{" "}
                  <span className="muted">
                    {r.confidence != null && `${Math.round(100 * r.confidence)}% interval`} {r.interval_method && `(${r.interval_method})`}
                  </span>
                </dd>
                <dt>fixed / broke</dt>
                <dd>
                  <span className="ok">{r.fixed.length} fixed</span> · <span className="bad">{r.broke.length} broke</span>
                </dd>
              </dl>
            )}
            {r.tasks.length > 0 && (
              <ListTable
                testid="rerun-tasks"
                columns={["task", "goal", "before", "after", "status", "new episodes"]}
                items={r.tasks}
                row={(t) => (
                  <tr key={t.task} data-status={t.status} className={`task-${t.status.replace(" ", "-")}`}>
                    <td className="mono">{t.task}</td>
                    <td>{t.goal}</td>
                    <td>{outcome(t.before)}</td>
                    <td>{outcome(t.after)}</td>
                    <td className={t.status === "fixed" ? "ok" : t.status === "broke" ? "bad" : ""}>{t.status}</td>
                    <td>
                      {t.episode_ids.map((e) => (
                        <Link key={e} to={`/episodes/${enc(e)}/steps/0`} className="chip mono">
                          {e}
                        </Link>
                      ))}
                    </td>
                  </tr>
                )}
              />
            )}
          </>
        )}
      </Async>
    </main>
  );
}
