// The routes: each view has a URL that opens it directly.
import { ComparePage } from "./pages/ComparePage";
import { EpisodePage } from "./pages/EpisodePage";
import { ExportsPage } from "./pages/ExportsPage";
import { GroupPage, GroupsPage } from "./pages/GroupsPage";
import { RerunPage, RerunsPage } from "./pages/RerunsPage";
import { SetPage, SetsPage } from "./pages/SetsPage";
import { SqlPage } from "./pages/SqlPage";
import { StatsPage } from "./pages/StatsPage";
import { RunPage, TrainingPage } from "./pages/TrainingPage";
import { Link, match, useLocation } from "./router";

function Page({ path }: { path: string }) {
  let p: Record<string, string> | null;
  if (path === "/" || path === "") return <EpisodePage />;
  if ((p = match("/episodes/:id/steps/:n", path))) return <EpisodePage id={p.id} step={p.n} />;
  if ((p = match("/episodes/:id", path))) return <EpisodePage id={p.id} />;
  if ((p = match("/compare/:a/:b", path))) return <ComparePage a={p.a} b={p.b} />;
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
  return (
    <main className="page">
      <div className="error" role="alert">
        No page at {path}. <Link to="/">Go to the episodes</Link>
      </div>
    </main>
  );
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
  const active = (to: string) => (to === "/" ? ["/", "/episodes", "/compare"].includes(section) : section === to);
  return (
    <div className="app">
      <header className="topbar">
        <strong>EpisodeLake</strong>
        {NAV.map(([to, label]) => (
          <Link key={to} to={to} className={active(to) ? "active" : ""}>
            {label}
          </Link>
        ))}
        <a href="/api/docs" className="right-link">
          API
        </a>
      </header>
      <Page path={path} />
    </div>
  );
}
