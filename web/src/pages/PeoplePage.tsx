// /people: the lake's users and their roles. An admin adds a user (their token is shown once,
// to hand over), changes a role, reissues a token (the old one stops working) and removes a
// user: the same changes as `elake user add | remove` on the command line, each an audit row
// under the admin's name (POST /api/users, PATCH /api/users/{name}, POST
// /api/users/{name}/token, DELETE /api/users/{name}). Others read who is on the team.
import { useState, type FormEvent } from "react";
import { useQuery } from "@tanstack/react-query";
import { api, call, type UserOut } from "../api/client";
import { invalidate, queries } from "../api/queries";
import { ask } from "../components/Dialogs";
import { ListTable } from "../components/ListTable";
import { Options } from "../components/Options";
import { RoleNote, useMay } from "../components/Role";
import { ActionError, Async } from "../components/Status";
import { Time } from "../components/Time";
import { toast } from "../components/Toasts";
import { useAction, useTitle } from "../hooks";

const ROLES = ["viewer", "curator", "admin"] as const;
type Role = (typeof ROLES)[number];

/** A token the server gave once: shown until dismissed, to hand over. */
interface Issued {
  name: string;
  token: string;
  why: string;
}

export function PeoplePage() {
  useTitle("People");
  const me = useQuery(queries.me());
  const people = useQuery(queries.users());
  const may = useMay();
  const action = useAction();
  const [issued, setIssued] = useState<Issued | null>(null);
  const admin = may("admin") && me.data?.sign_in === true;
  const changed = () => invalidate(["users"], ["audit"]);
  const add = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const data = new FormData(form);
    action.run(async () => {
      const made = await call(api.POST("/api/users", { body: { name: String(data.get("name")).trim(), role: String(data.get("role")) as Role } }));
      setIssued({ name: made.name, token: made.token, why: `added as a ${made.role}` });
      form.reset();
      void changed();
    });
  };
  const setRole = (u: UserOut, role: Role) =>
    action.run(async () => {
      const updated = await call(api.PATCH("/api/users/{name}", { params: { path: { name: u.name } }, body: { role } }));
      toast(`${updated.name} is a ${updated.role} now`);
      void changed();
    });
  const reissue = async (u: UserOut) => {
    const yes = await ask({ title: `Reissue ${u.name}'s token?`, body: `${u.name}'s token stops working; the new one is shown here once, to hand over.`, confirm: "Reissue" });
    if (!yes) return;
    action.run(async () => {
      const made = await call(api.POST("/api/users/{name}/token", { params: { path: { name: u.name } } }));
      setIssued({ name: made.name, token: made.token, why: "a new token (the old one no longer works)" });
      void changed();
    });
  };
  const remove = async (u: UserOut) => {
    const yes = await ask({ title: `Remove ${u.name}?`, body: `${u.name}'s token stops working. What they did stays in the audit log under their name.`, confirm: "Remove", danger: true });
    if (!yes) return;
    action.run(async () => {
      await call(api.DELETE("/api/users/{name}", { params: { path: { name: u.name } } }));
      toast(`Removed ${u.name}`);
      void changed();
    });
  };
  return (
    <main className="page" data-testid="people-page">
      <h2>People</h2>
      {me.data && !me.data.sign_in ? (
        <p className="muted" data-testid="people-open-server">
          This server needs no token: nobody signs in. The first user, an admin, is added on the command line (<span className="mono">elake user add NAME --role admin</span>
          ), which prints their token; from then on everyone signs in, and admins manage people here.
        </p>
      ) : (
        !admin && <RoleNote need="admin" what="Managing people" testid="people-role-note" />
      )}
      {issued && (
        <div className="issued-token" role="status" data-testid="issued-token">
          <p>
            <strong>{issued.name}</strong>: {issued.why}. Their token, shown this once (only its hash is kept): hand it over.
          </p>
          <code className="mono token" aria-label={`token issued to ${issued.name}`}>
            {issued.token}
          </code>{" "}
          <button type="button" onClick={() => void navigator.clipboard?.writeText(issued.token).then(() => toast("Copied the token"))}>
            copy
          </button>{" "}
          <button type="button" className="link" onClick={() => setIssued(null)}>
            done
          </button>
        </div>
      )}
      <Async state={people} what="people">
        {(list) => (
          <ListTable
            testid="people"
            columns={["name", "role", "added", "by", ...(admin ? [""] : [])]}
            items={list}
            row={(u) => (
              <tr key={u.name} data-user={u.name}>
                <td>
                  {u.name}
                  {u.name === me.data?.name && <span className="muted"> (you)</span>}
                </td>
                <td>
                  {admin ? (
                    <select value={u.role} aria-label={`role of ${u.name}`} disabled={action.busy} onChange={(e) => setRole(u, e.target.value as Role)}>
                      <Options values={ROLES} />
                    </select>
                  ) : (
                    u.role
                  )}
                </td>
                <td>
                  <Time value={u.created_at} />
                </td>
                <td>{u.created_by ?? "—"}</td>
                {admin && (
                  <td>
                    <button type="button" onClick={() => void reissue(u)} disabled={action.busy} aria-label={`reissue token of ${u.name}`}>
                      reissue token
                    </button>{" "}
                    <button type="button" className="danger" onClick={() => void remove(u)} disabled={action.busy} aria-label={`remove ${u.name}`}>
                      remove
                    </button>
                  </td>
                )}
              </tr>
            )}
            empty="No users: this server needs no token."
          />
        )}
      </Async>
      {admin && (
        <form className="inline-form" onSubmit={add} data-testid="add-user">
          <input name="name" placeholder="name" aria-label="new user's name" required maxLength={200} />
          <select name="role" defaultValue="viewer" aria-label="new user's role">
            <Options values={ROLES} />
          </select>
          <button type="submit" disabled={action.busy}>
            Add user
          </button>
        </form>
      )}
      <ActionError message={action.error} testid="people-error" />
    </main>
  );
}
