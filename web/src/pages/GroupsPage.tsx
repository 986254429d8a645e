// /groups and /groups/<id>: episode groups, and one group's anchor-state groups as rows of
// thumbnails with each step's discounted return and advantage, to judge the grouping by eye.
// A card keeps the screen's shape and the whole episode id on one line; a legend and each
// number's tooltip say what return and advantage are.
import { useQuery } from "@tanstack/react-query";
import { imageSrc } from "../api/client";
import { queries } from "../api/queries";
import { ListTable } from "../components/ListTable";
import { Async } from "../components/Status";
import { mark } from "../components/TaskTree";
import { useTitle } from "../hooks";
import { Link, enc } from "../router";

const num = (v: number | null | undefined) => (v === null || v === undefined ? "—" : v.toFixed(3));

export function GroupsPage() {
  const groups = useQuery(queries.groups());
  useTitle("Groups");
  return (
    <main className="page" data-testid="groups-page">
      <h2>Episode groups</h2>
      <Async state={groups} what="groups">
        {(list) => (
          <ListTable
            columns={["group", "task", "episodes", "successes", "mean reward"]}
            items={list}
            row={(g) => (
              <tr key={g.group_id}>
                <td>
                  <Link to={`/groups/${enc(g.group_id)}`}>{g.group_id}</Link>
                </td>
                <td>{g.task_name}</td>
                <td>{g.episodes}</td>
                <td>{g.successes}</td>
                <td>{num(g.mean_reward)}</td>
              </tr>
            )}
            empty="No episode has a group_id."
          />
        )}
      </Async>
    </main>
  );
}

export function GroupPage({ id }: { id: string }) {
  const group = useQuery(queries.group(id));
  useTitle(`Group ${id}`);
  return (
    <main className="page" data-testid="group-page">
      <p>
        <Link to="/groups">← all groups</Link>
      </p>
      <Async state={group} what={`group ${id}`}>
        {(g) => (
          <>
            <h2>Group {g.group_id}</h2>
            <p className="muted">{g.advantages_note}</p>
            <p className="muted">
              {g.episodes.length} episodes:{" "}
              {g.episodes.map((e) => (
                <span key={e.episode_id} className="chip">
                  {mark(e.success)} <Link to={`/episodes/${enc(e.episode_id)}/steps/0`}>{e.episode_id}</Link>
                </span>
              ))}
            </p>
            <p className="muted">
              {g.anchors.length} anchor states · {g.anchors.filter((a) => a.episodes > 1).length} shared by several episodes · {g.unanchored_steps} steps without an anchor key
            </p>
            <p className="muted" data-testid="group-legend">
              Each card: a step's screen, its episode and step, its action, then <strong>return</strong> (the discounted return from that step
              on) and <strong>advantage</strong> (how much better than its group the step did, episode and anchor state together: the weight GiGPO gives the step's update).
            </p>
            {g.anchors.map((a) => (
              <section key={a.anchor_key} className="anchor-row" data-testid="anchor-row">
                <h4>
                  <span className="mono">{a.anchor_key}</span> · {a.episodes} episode{a.episodes === 1 ? "" : "s"} · {a.steps.length} steps
                </h4>
                <div className="thumbs">
                  {a.steps.map((s) => (
                    <Link key={`${s.episode_id}/${s.step}`} className="card" to={`/episodes/${enc(s.episode_id)}/steps/${s.step}`}>
                      <img src={imageSrc(s.image_url, 140)} alt="" loading="lazy" />
                      <span className="mono card-line">
                        <span className="card-id">{s.episode_id}</span> #{s.step}
                      </span>
                      <span>{s.action_type}</span>
                      <span className="card-line">
                        <span title="discounted return: the rewards from this step on, each discounted by gamma per step">return {num(s.discounted_return)}</span>
                      </span>
                      <span className="card-line">
                        <span title="advantage: how much better than its group this step did (GiGPO: its episode against the group's, its return against its anchor state's)">advantage {num(s.advantage)}</span>
                      </span>
                    </Link>
                  ))}
                </div>
              </section>
            ))}
          </>
        )}
      </Async>
    </main>
  );
}
