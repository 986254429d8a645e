// The routes and the layout they share.
import { EpisodePage } from "./pages/EpisodePage";
import { Suspense, lazy, useEffect, type ComponentType, type ReactNode } from "react";
import { Outlet, useParams, type RouteObject } from "react-router";
import { DialogHost } from "./components/Dialogs";
import { KeysHelp } from "./components/KeysHelp";
import { LiveIndicator } from "./components/Live";
import { ViewPage } from "./components/SavedViews";
import { Search } from "./components/Search";
import { SignedIn } from "./components/SignedIn";
import { Loading } from "./components/Status";
import { Toasts } from "./components/Toasts";
import { useTitle } from "./hooks";
import { LeaveGuard, Link, useLocation } from "./router";

/** A page loaded when first opened. The overview and the replay come with the app; every
 * other view (the chart pages with their chart library) is a chunk of its own, fetched while
 * the view before stays on screen (navigations render in a transition). */
function page<P>(load: () => Promise<ComponentType<P>>) {
  return lazy(() => load().then((c) => ({ default: c })));
}
const ComparePage = page(() => import("./pages/ComparePage").then((m) => m.ComparePage));
const ExportsPage = page(() => import("./pages/ExportsPage").then((m) => m.ExportsPage));
const GroupsPage = page(() => import("./pages/GroupsPage").then((m) => m.GroupsPage));
const GroupPage = page(() => import("./pages/GroupsPage").then((m) => m.GroupPage));
const RerunsPage = page(() => import("./pages/RerunsPage").then((m) => m.RerunsPage));
const RerunPage = page(() => import("./pages/RerunsPage").then((m) => m.RerunPage));
const SetsPage = page(() => import("./pages/SetsPage").then((m) => m.SetsPage));
const SetPage = page(() => import("./pages/SetsPage").then((m) => m.SetPage));
const SqlPage = page(() => import("./pages/SqlPage").then((m) => m.SqlPage));
const StatsPage = page(() => import("./pages/StatsPage").then((m) => m.StatsPage));
const TrainingPage = page(() => import("./pages/TrainingPage").then((m) => m.TrainingPage));
const RunPage = page(() => import("./pages/TrainingPage").then((m) => m.RunPage));
const PeoplePage = page(() => import("./pages/PeoplePage").then((m) => m.PeoplePage));

/** `/`, `/episodes/:id` and `/episodes/:id/steps/:n` share one page (the task tree stays
 * open, the replay keeps its state), so they are children of one layout route. */
function Browse() {
  const { id, n } = useParams();
  return <EpisodePage id={id} step={n} />;
}

/** A route's element: the page with the route's path parameters as its props. */
function withParams<P extends string>(render: (params: Record<P, string>) => ReactNode) {
  function Route() {
    return <>{render(useParams() as Record<P, string>)}</>;
  }
  return <Route />;
}

// The routes: each view has a URL that opens it directly.
export const routes: RouteObject[] = [
  {
    element: <App />,
    children: [
      { element: <Browse />, children: [{ index: true }, { path: "episodes/:id" }, { path: "episodes/:id/steps/:n" }] },
      // /compare/<a>/<b>/<c>...: the path holds the compared episodes (ComparePage reads them)
      { path: "compare/*", element: <ComparePage /> },
      { path: "views/:id", element: withParams<"id">((p) => <ViewPage id={p.id} />) },
      { path: "sets", element: <SetsPage /> },
      { path: "sets/:id", element: withParams<"id">((p) => <SetPage id={p.id} />) },
      { path: "groups", element: <GroupsPage /> },
      { path: "groups/:id", element: withParams<"id">((p) => <GroupPage id={p.id} />) },
      { path: "stats", element: <StatsPage /> },
      { path: "sql", element: <SqlPage /> },
      { path: "exports", element: <ExportsPage /> },
      { path: "reruns", element: <RerunsPage /> },
      { path: "reruns/:id", element: withParams<"id">((p) => <RerunPage id={p.id} />) },
      { path: "training", element: <TrainingPage /> },
      { path: "training/:id", element: withParams<"id">((p) => <RunPage id={p.id} />) },
      { path: "people", element: <PeoplePage /> },
      { path: "*", element: <NotFound /> },
    ],
  },
];

function NotFound() {
  const { path } = useLocation();
  useTitle("Not found");
  return (
    <main className="page" data-testid="not-found">
      <h1>Not found</h1>
      <div className="error" role="alert">
        No page at {path}. <Link to="/">Go to the episodes</Link>
      </div>
    </main>
  );
}

/** The view's content: the skip link's target, and where Escape sends the keys back to
 * (the replay's shortcuts) from a text box or other control. */
function focusContent(): void {
  document.getElementById("content")?.focus({ preventScroll: true });
}

const NAV: [string, string][] = [
  ["/", "Episodes"],
  ["/sets", "Sets"],
  ["/groups", "Groups"],
  ["/stats", "Stats"],
  ["/sql", "SQL"],
  ["/exports", "Exports"],
  ["/reruns", "Re-runs"],
  ["/training", "Training"],
  ["/people", "People"],
];

/** The layout every route shares: the top bar, the content, toasts and dialogs. */
function App() {
  const { path } = useLocation();
  const section = "/" + (path.split("/")[1] ?? "");
  const active = (to: string) => (to === "/" ? ["/", "/episodes", "/compare", "/views"].includes(section) : section === to);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const el = document.activeElement;
      if (e.key !== "Escape" || document.querySelector("dialog[open]")) return;
      if (el instanceof HTMLInputElement || el instanceof HTMLTextAreaElement || el instanceof HTMLSelectElement) {
        (el as HTMLElement).blur();
        focusContent();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
  return (
    <div className="app">
      <a
        href="#content"
        className="skip-link"
        onClick={(e) => {
          e.preventDefault();
          focusContent();
        }}
      >
        Skip to content
      </a>
      <header className="topbar">
        <strong>EpisodeLake</strong>
        <nav aria-label="sections" className="sections">
          {NAV.map(([to, label]) => (
            <Link key={to} to={to} className={active(to) ? "active" : ""} aria-current={active(to) ? "page" : undefined}>
              {label}
            </Link>
          ))}
        </nav>
        <Search />
        <LiveIndicator />
        <KeysHelp />
        <a href="/api/docs">API</a>
        <SignedIn />
      </header>
      <div id="content" tabIndex={-1}>
        <Suspense fallback={<Loading what="the page" />}>
          <Outlet />
        </Suspense>
      </div>
      <LeaveGuard />
      <Toasts />
      <DialogHost />
    </div>
  );
}
