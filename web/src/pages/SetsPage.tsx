// /sets and /sets/<id>: the curated sets, and one set's members with their categories,
// failing steps and notes.
import { useState, type FormEvent } from "react";
import { api, call, type SetRow } from "../api/client";
import { Async } from "../components/Status";
import { mark } from "../components/TaskTree";
import { useApi } from "../hooks";
import { Link, enc, navigate } from "../router";

const KINDS = ["failure", "regression", "sft", "eval"] as const;
type Kind = (typeof KINDS)[number];

export function SetsPage() {
  const sets = useApi(() => call(api.GET("/api/sets")), []);
  const [error, setError] = useState<string>();
  const create = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget);
    try {
      const created = await call(
        api.POST("/api/sets", { body: { name: String(form.get("name")), kind: String(form.get("kind")) as Kind, description: String(form.get("description") || "") || null } }),
      );
      navigate(`/sets/${enc(created.set_id)}`);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <main className="page" data-testid="sets-page">
      <h2>Sets</h2>
      <Async state={sets} what="sets">
        {(list) => (
          <table className="grid">
            <thead>
              <tr>
                <th>name</th>
                <th>kind</th>
                <th>members</th>
                <th>pinned tag</th>
                <th>description</th>
                <th>updated</th>
              </tr>
            </thead>
            <tbody>
              {list.map((s) => (
                <tr key={s.set_id}>
                  <td>
                    <Link to={`/sets/${enc(s.set_id)}`}>{s.name}</Link>
                  </td>
                  <td>{s.kind}</td>
                  <td>{s.members}</td>
                  <td>{s.pinned_tag ?? "—"}</td>
                  <td>{s.description}</td>
                  <td>{s.updated_at}</td>
                </tr>
              ))}
              {list.length === 0 && (
                <tr>
                  <td colSpan={6} className="muted">
                    No sets yet: create one below, or press 1-5 while replaying an episode.
                  </td>
                </tr>
              )}
            </tbody>
          </table>
        )}
      </Async>
      <form className="inline-form" onSubmit={create}>
        <input name="name" placeholder="new set name" required />
        <select name="kind" defaultValue="failure">
          {KINDS.map((k) => (
            <option key={k}>{k}</option>
          ))}
        </select>
        <input name="description" placeholder="description" />
        <button type="submit">Create set</button>
      </form>
      {error && <div className="error">{error}</div>}
    </main>
  );
}

export function SetPage({ id }: { id: string }) {
  const set = useApi(() => call(api.GET("/api/sets/{set_id}", { params: { path: { set_id: id } } })), [id]);
  const members = useApi(() => call(api.GET("/api/sets/{set_id}/members", { params: { path: { set_id: id } } })), [id]);
  const tags = useApi(() => call(api.GET("/api/health")), []);
  const [error, setError] = useState<string>();
  const update = async (body: Partial<Pick<SetRow, "name" | "kind" | "description" | "pinned_tag">>) => {
    try {
      await call(api.PATCH("/api/sets/{set_id}", { params: { path: { set_id: id } }, body: body as never }));
      setError(undefined);
      set.reload();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const remove = async (episodeId: string) => {
    await call(api.DELETE("/api/sets/{set_id}/members/{episode_id}", { params: { path: { set_id: id, episode_id: episodeId } } }));
    members.reload();
    set.reload();
  };
  return (
    <main className="page" data-testid="set-page">
      <p>
        <Link to="/sets">← all sets</Link>
      </p>
      <Async state={set} what="set">
        {(s) => (
          <div className="set-head">
            <h2>{s.name}</h2>
            <form
              className="inline-form"
              key={s.updated_at}
              onSubmit={(e) => {
                e.preventDefault();
                const f = new FormData(e.currentTarget);
                void update({
                  name: String(f.get("name")),
                  kind: String(f.get("kind")) as Kind,
                  description: String(f.get("description") || "") || null,
                  pinned_tag: String(f.get("pinned_tag") || "") || null,
                });
              }}
            >
              <input name="name" defaultValue={s.name ?? ""} aria-label="name" />
              <select name="kind" defaultValue={s.kind ?? "failure"} aria-label="kind">
                {KINDS.map((k) => (
                  <option key={k}>{k}</option>
                ))}
              </select>
              <input name="description" defaultValue={s.description ?? ""} placeholder="description" aria-label="description" />
              <select name="pinned_tag" defaultValue={s.pinned_tag ?? ""} aria-label="pinned tag">
                <option value="">not pinned</option>
                {tags.data?.tags.map((t) => (
                  <option key={t}>{t}</option>
                ))}
              </select>
              <button type="submit">Save</button>
              <button
                type="button"
                className="danger"
                onClick={() => call(api.DELETE("/api/sets/{set_id}", { params: { path: { set_id: id } } })).then(() => navigate("/sets"), (e: Error) => setError(e.message))}
              >
                Delete set
              </button>
            </form>
            <p className="muted">
              {s.members} members · <Link to={`/?set_id=${enc(id)}`}>browse them</Link> · set id <span className="mono">{s.set_id}</span>
            </p>
          </div>
        )}
      </Async>
      {error && <div className="error">{error}</div>}
      <Async state={members} what="members">
        {(list) => (
          <table className="grid" data-testid="members">
            <thead>
              <tr>
                <th>episode</th>
                <th>task</th>
                <th>outcome</th>
                <th>category</th>
                <th>failing step</th>
                <th>note</th>
                <th>added</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {list.map((m) => (
                <tr key={m.episode_id}>
                  <td>
                    <Link to={`/episodes/${enc(m.episode_id)}/steps/${m.failing_step ?? 0}`}>{m.episode_id}</Link>
                  </td>
                  <td>{m.task_name}</td>
                  <td>{mark(m.success)}</td>
                  <td>{m.failure_category ?? "—"}</td>
                  <td>{m.failing_step ?? "—"}</td>
                  <td className="note">{m.note}</td>
                  <td>
                    {m.added_at} {m.added_by && `by ${m.added_by}`}
                  </td>
                  <td>
                    <button type="button" className="link" onClick={() => remove(m.episode_id)}>
                      remove
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Async>
    </main>
  );
}
