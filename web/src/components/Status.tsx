// Loading and error states: every view shows one of these rather than a blank page.
import type { ReactNode } from "react";
import { ApiError } from "../api/client";

export function Loading({ what }: { what: string }) {
  return (
    <div className="loading" role="status">
      Loading {what}…
    </div>
  );
}

/** Why `what` did not load. Retry is offered only where trying again can help: the server
 * did not answer or failed, not when it refused the request as asked (a bad filter). */
export function ErrorBox({ error, what, retry }: { error: Error; what: string; retry?: () => void }) {
  const retryable = !(error instanceof ApiError) || error.status === 0 || error.status >= 500;
  return (
    <div className="error" role="alert">
      <strong>Could not load {what}:</strong> {error.message}
      {retry && retryable && (
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

/** What Async shows: a query's answer, its failure, and how to ask again. */
export interface Loaded<T> {
  data: T | undefined;
  error: Error | null;
  refetch: () => unknown;
}

/** Renders `children(data)` once loaded, else the loading or error state. A refresh that
 * fails (queries are not retried) keeps what is shown, with the failure above it: a busy
 * server's one slow answer must not blank a page the user is reading. */
export function Async<T>({ state, what, children }: { state: Loaded<T>; what: string; children: (data: T) => ReactNode }) {
  const retry = () => void state.refetch();
  if (state.data === undefined) {
    return state.error ? <ErrorBox error={state.error} what={what} retry={retry} /> : <Loading what={what} />;
  }
  return (
    <>
      {state.error && <ErrorBox error={state.error} what={`the latest ${what}`} retry={retry} />}
      {children(state.data)}
    </>
  );
}
