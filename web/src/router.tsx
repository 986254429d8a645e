// Routing on React Router's data router: every view has a URL that opens it directly
// (FastAPI answers unknown paths with index.html), links move without reloading the page,
// and leaving a view with unsaved text asks first. The pages import what they need from
// here (navigate, Link, useLocation), so they speak of the app's URLs, not of the library.
import { useEffect, useMemo, useRef } from "react";
import {
  Link,
  createBrowserRouter,
  createPath,
  useBlocker,
  useNavigationType,
  useLocation as useRouterLocation,
  type BlockerFunction,
  type RouteObject,
} from "react-router";
import { ask } from "./components/Dialogs";

export { Link };

type Router = ReturnType<typeof createBrowserRouter>;
let router: Router | null = null;

/** The app's router over `routes`; `navigate` below goes through it. */
export function createRouter(routes: RouteObject[]): Router {
  router = createBrowserRouter(routes);
  return router;
}

/** Marks a history entry written by a silent navigation (see `navigate`). */
const SILENT = { silent: true };

/** Go to `to`. `silent` replaces the entry and skips the leave guard: for a view that already
 * shows `to` (the replay after a step change), whose own state moved first, so the address bar
 * follows it instead of resetting it. The router renders the new location in a transition,
 * after the view has painted the step. */
export function navigate(to: string, options: { replace?: boolean; silent?: boolean } = {}): void {
  if (!router) throw new Error("navigate() before the router exists");
  const here = createPath(router.state.location);
  void router.navigate(to, {
    // the same address again is no new history entry, as with a link
    replace: options.replace || options.silent || to === here,
    state: options.silent ? SILENT : undefined,
    preventScrollReset: options.silent,
  });
}

export interface Location {
  path: string;
  query: URLSearchParams;
  /** Changes with every navigation, silent or not. */
  key: string;
  /** Whether this location came from a silent `navigate` (not a link, back/forward or a
   * reload): a view that follows the URL for its state keeps the state it already has. */
  silent: boolean;
}

export function useLocation(): Location {
  const loc = useRouterLocation();
  const type = useNavigationType();
  const query = useMemo(() => new URLSearchParams(loc.search), [loc.search]);
  const silent = type === "REPLACE" && (loc.state as typeof SILENT | null)?.silent === true;
  return { path: loc.pathname, query, key: loc.key, silent };
}

// Views with unsaved text register what would be lost; leaving asks first (in the app for
// its own links and back/forward, through the browser for a reload or a closed tab).
const guards = new Set<{ current: string | null }>();

function unsaved(): string | null {
  for (const g of guards) if (g.current) return g.current;
  return null;
}

window.addEventListener("beforeunload", (e) => {
  if (unsaved()) e.preventDefault();
});

/** While `lost` names unsaved work ("your note on wifi_on-2"), leaving the view asks first. */
export function useLeaveGuard(lost: string | null): void {
  const guard = useRef(lost);
  guard.current = lost;
  useEffect(() => {
    guards.add(guard);
    return () => {
      guards.delete(guard);
    };
  }, []);
}

const leaving: BlockerFunction = ({ currentLocation, nextLocation, historyAction }) =>
  unsaved() !== null &&
  createPath(currentLocation) !== createPath(nextLocation) &&
  !(historyAction === "REPLACE" && (nextLocation.state as typeof SILENT | null)?.silent);

/** Asks before any navigation (links, `navigate`, back/forward) would drop unsaved work;
 * rendered once, in the layout every route shares. */
export function LeaveGuard() {
  const blocker = useBlocker(leaving);
  const asking = useRef(false);
  useEffect(() => {
    if (blocker.state !== "blocked" || asking.current) return;
    asking.current = true;
    const lost = unsaved() ?? "Your work";
    void ask({ title: "Leave without saving?", body: `${lost} is unsaved and will be lost.`, confirm: "Leave without saving", cancel: "Stay", danger: true }).then(
      (leave) => {
        asking.current = false;
        if (leave) blocker.proceed();
        else blocker.reset();
      },
    );
  }, [blocker]);
  return null;
}

export { enc, withQuery } from "./url";
