// A small history-API router: every view has a URL that opens it directly (FastAPI
// answers unknown paths with index.html), and links move without reloading the page.
import { useEffect, useRef, useSyncExternalStore, type AnchorHTMLAttributes, type MouseEvent } from "react";
import { ask } from "./components/Dialogs";

const listeners = new Set<() => void>();
// Counts navigations the pages were told about, so a view can tell "someone navigated
// here again" from "the address bar was rewritten silently" (see navigate).
let generation = 0;
// The address the pages show: where back/forward returns to when the user stays.
let shown = href();

function notify(): void {
  generation++;
  shown = href();
  listeners.forEach((l) => l());
}

function onPopState(): void {
  const target = href();
  if (!unsaved()) return notify();
  window.history.pushState(null, "", shown); // stay until the user decides
  navigate(target);
}

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  if (listeners.size === 1) window.addEventListener("popstate", onPopState);
  return () => {
    listeners.delete(listener);
    if (listeners.size === 0) window.removeEventListener("popstate", onPopState);
  };
}

function href(): string {
  return window.location.pathname + window.location.search;
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

function snapshot(): string {
  return `${generation} ${href()}`;
}

export interface Location {
  path: string;
  query: URLSearchParams;
  /** Increases with every navigation the pages are told about. */
  generation: number;
}

export function useLocation(): Location {
  const snap = useSyncExternalStore(subscribe, snapshot);
  const space = snap.indexOf(" ");
  const url = new URL(snap.slice(space + 1), window.location.origin);
  return { path: url.pathname, query: url.searchParams, generation: Number(snap.slice(0, space)) };
}

/** Go to `to`. `silent` only rewrites the address bar (replacing the entry) without
 * re-rendering the pages that follow the location: for a view that already shows `to`,
 * such as the replay after a step change, so one key press re-renders only the replay. */
export function navigate(to: string, options: { replace?: boolean; silent?: boolean } = {}): void {
  if (options.silent) {
    window.history.replaceState(null, "", to);
    shown = href();
    return;
  }
  const lost = unsaved();
  if (lost && to !== href()) {
    void ask({ title: "Leave without saving?", body: `${lost} is unsaved and will be lost.`, confirm: "Leave without saving", cancel: "Stay", danger: true }).then(
      (leave) => leave && go(to, options),
    );
    return;
  }
  go(to, options);
}

function go(to: string, options: { replace?: boolean }): void {
  if (to !== href()) {
    if (options.replace) window.history.replaceState(null, "", to);
    else window.history.pushState(null, "", to);
  }
  notify();
}

/** `/episodes/:id/steps/:n` against a path: the decoded params, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split("/");
  const have = path.replace(/\/+$/, "").split("/");
  if (want.length !== have.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    if (want[i].startsWith(":")) params[want[i].slice(1)] = decodeURIComponent(have[i]);
    else if (want[i] !== have[i]) return null;
  }
  return params;
}

export function Link({ to, replace, ...rest }: { to: string; replace?: boolean } & AnchorHTMLAttributes<HTMLAnchorElement>) {
  const onClick = (e: MouseEvent<HTMLAnchorElement>) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to, { replace });
  };
  return <a href={to} onClick={onClick} {...rest} />;
}

/** Paths with the current query string kept (filters travel with the user). */
export function withQuery(path: string, query: URLSearchParams): string {
  const q = query.toString();
  return q ? `${path}?${q}` : path;
}

export const enc = encodeURIComponent;
