// Who is signed in, in the top bar: the name and role the server knows this browser by, and
// a way out (a form's POST: the server signs nobody out on a GET, so no image or link on
// another page can). On a server that needs no token (a lake without users, on loopback) it shows
// nothing: everyone on the machine may do everything there.
import { useQuery } from "@tanstack/react-query";
import { queries } from "../api/queries";

const ROLE_HELP: Record<string, string> = {
  viewer: "You can read everything; changes need a curator.",
  curator: "You can curate sets, notes, labels and views, and start exports and re-runs.",
  admin: "You can also delete sets and exports, edit episodes and manage users.",
};

export function SignedIn() {
  const me = useQuery(queries.me());
  if (!me.data?.sign_in) return null;
  const { name, role } = me.data;
  return (
    <span className="signed-in" data-testid="signed-in" title={ROLE_HELP[role]}>
      {name} <span className="role">({role})</span>{" "}
      <form method="post" action="/signout" className="sign-out">
        <button type="submit" className="link">Sign out</button>
      </form>
    </span>
  );
}
