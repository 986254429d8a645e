// Loading and error states: every view shows one of these rather than a blank page.
import type { ReactNode } from "react";
import type { Loaded } from "../hooks";

export function Loading({ what }: { what: string }) {
  return (
    <div className="loading" role="status">
      Loading {what}…
    </div>
  );
}

export function ErrorBox({ error, retry }: { error: Error; retry?: () => void }) {
  return (
    <div className="error" role="alert">
      <strong>Could not load.</strong> {error.message}
      {retry && (
        <button type="button" onClick={retry}>
          Retry
        </button>
      )}
    </div>
  );
}

/** Why the last action the user started (a form, a button) failed; nothing once one succeeds. */
export function ActionError({ message, testid }: { message: string | undefined; testid?: string }) {
  if (!message) return null;
  return (
    <div className="error" role="alert" data-testid={testid}>
      {message}
    </div>
  );
}

/** Renders `children(data)` once loaded, else the loading or error state. */
export function Async<T>({ state, what, children }: { state: Loaded<T>; what: string; children: (data: T) => ReactNode }) {
  if (state.error) return <ErrorBox error={state.error} retry={state.reload} />;
  if (state.data === undefined) return <Loading what={what} />;
  return <>{children(state.data)}</>;
}
