// What the signed-in person may do, for views that offer changes: a viewer is not shown
// controls the server would refuse, but a line saying who may. The server checks every
// request anyway (api/deps.authorize); this only keeps a viewer from trying in vain. On a
// server that needs no token (and while /api/me loads) everything is offered.
import { useQuery } from "@tanstack/react-query";
import { queries } from "../api/queries";

const ROLES = ["viewer", "curator", "admin"] as const;
type Role = (typeof ROLES)[number];

/** `may(role)`: whether the signed-in person's role includes `role`. */
export function useMay(): (role: Role) => boolean {
  const me = useQuery(queries.me());
  const mine = me.data?.sign_in ? me.data.role : "admin";
  return (role) => ROLES.indexOf(mine as Role) >= ROLES.indexOf(role);
}

/** The names work can be assigned to: the lake's people who may curate (the server refuses a
 * viewer), and whoever has it now, so the select shows the current value. */
export function useAssignable(current: string | null | undefined): string[] {
  const people = useQuery(queries.users());
  const curators = (people.data ?? []).filter((u) => u.role !== "viewer").map((u) => u.name);
  return [...new Set([...curators, ...(current ? [current] : [])])];
}

/** The line shown instead of controls a person's role does not allow. */
export function RoleNote({ need, what, testid }: { need: Role; what: string; testid?: string }) {
  const me = useQuery(queries.me());
  return (
    <p className="muted role-note" data-testid={testid ?? "role-note"}>
      {what} needs the {need} role; you are signed in as {me.data?.name} ({me.data?.role}). An admin can change it.
    </p>
  );
}
