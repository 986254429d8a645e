// The routes: each view has a URL that opens it directly.
import { ComparePage } from "./pages/ComparePage";
import { EpisodePage } from "./pages/EpisodePage";
import { ExportsPage } from "./pages/ExportsPage";
import { GroupPage, GroupsPage } from "./pages/GroupsPage";
import { RerunPage, RerunsPage } from "./pages/RerunsPage";
import { SetPage, SetsPage } from "./pages/SetsPage";
import { SqlPage } from "./pages/SqlPage";
import { Suspense, lazy, useEffect } from "react";
import { DialogHost } from "./components/Dialogs";
import { KeysHelp } from "./components/KeysHelp";
import { LiveIndicator } from "./components/Live";
import { ViewPage } from "./components/SavedViews";
import { Search } from "./components/Search";
import { Loading } from "./components/Status";
import { Toasts } from "./components/Toasts";
import { useTitle } from "./hooks";
import { Link, match, useLocation } from "./router";

// The chart pages load with their chart library when first opened, not with the replay.
const StatsPage = lazy(() => import("./pages/StatsPage").then((m) => ({ default: m.StatsPage })));
const TrainingPage = lazy(() => import("./pages/TrainingPage").then((m) => ({ default: m.TrainingPage })));
const RunPage = lazy(() => import("./pages/TrainingPage").then((m) => ({ default: m.RunPage })));

function Page({ path }: { path: string }) {
  let p: Record<string, string> | null;
  if (path === "/" || path === "") return <EpisodePage />;
  if ((p = match("/episodes/:id/steps/:n", path))) return <EpisodePage id={p.id} step={p.n} />;
  if ((p = match("/episodes/:id", path))) return <EpisodePage id={p.id} />;
  if ((p = match("/compare/:a/:b", path))) return <ComparePage a={p.a} b={p.b} />;
  if ((p = match("/views/:id", path))) return <ViewPage id={p.id} />;
  if (path === "/sets") return <SetsPage />;
  if ((p = match("/sets/:id", path))) return <SetPage id={p.id} />;
  if (path === "/groups") return <GroupsPage />;
  if ((p = match("/groups/:id", path))) return <GroupPage id={p.id} />;
  if (path === "/stats") return <StatsPage />;
  if (path === "/sql") return <SqlPage />;
  if (path === "/exports") return <ExportsPage />;
  if (path === "/reruns") return <RerunsPage />;
  if ((p = match("/reruns/:id", path))) return <RerunPage id={p.id} />;
  if (path === "/training") return <TrainingPage />;
  if ((p = match("/training/:id", path))) return <RunPage id={p.id} />;
  return <NotFound path={path} />;
}

function NotFound({ path }: { path: string }) {
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
];

export function App() {
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
      </header>
      <div id="content" tabIndex={-1}>
        <Suspense fallback={<Loading what="the page" />}>
          <Page path={path} />
        </Suspense>
      </div>
      <Toasts />
      <DialogHost />
    </div>
  );
}
