// Full-text search hits inside the replay. A hit opened from the search box puts its words
// in the replay's address (`?find=payment%20failed`); the replay then asks the search for
// this episode's hits once (GET /api/search?episode_id=...) and shows them on
// every step they are on: the matched lines boxed on the screenshot (the hit's OCR boxes),
// the matched words marked in the thinking, the raw response and the goal. The words to
// mark are the hit's `terms`, the field's own words that matched (the index matches stems,
// so the query "failing" marks "failed"), never a guess made here.
import { Fragment, useMemo, type ReactNode } from "react";
import { useQuery } from "@tanstack/react-query";
import type { OcrBox, SearchHit } from "../api/client";
import { queries } from "../api/queries";
import { Link, enc, useLocation, withQuery } from "../router";

/** The replay's query parameter holding the searched words. */
export const FIND = "find";
/** The most hits one episode shows (the API's cap). */
const EPISODE_HITS = 1000;

/** A step's hits, by field. */
export type StepHits = Partial<Record<"screen" | "thinking" | "response", SearchHit>>;

export interface Found {
  words: string;
  /** Hits by step number. */
  steps: Map<number, StepHits>;
  goal?: SearchHit;
  error: Error | null;
  loading: boolean;
}

/** The hits of `?find=` in episode `episodeId`, or null when the replay was opened without one. */
export function useFound(episodeId: string): Found | null {
  const { query } = useLocation();
  const words = (query.get(FIND) ?? "").trim();
  const hits = useQuery({ ...queries.search({ q: words, limit: EPISODE_HITS, episode_id: episodeId }), enabled: words !== "" });
  return useMemo(() => {
    if (!words) return null;
    const steps = new Map<number, StepHits>();
    let goal: SearchHit | undefined;
    for (const hit of hits.data ?? []) {
      if (hit.step === null || hit.step === undefined) goal = hit;
      else if (hit.field === "screen" || hit.field === "thinking" || hit.field === "response") {
        const at = steps.get(hit.step) ?? {};
        at[hit.field] = hit;
        steps.set(hit.step, at);
      }
    }
    return { words, steps, goal, error: hits.error, loading: hits.isPending };
  }, [words, hits.data, hits.error, hits.isPending]);
}

// Python's `\w` (the search's word pattern): letters, digits and underscores of any script.
const WORD = /[\p{L}\p{N}\p{M}_]+/gu;

/** `text` with the words in `terms` (lower-case) marked. */
export function Highlighted({ text, terms }: { text: string; terms: readonly string[] | undefined }) {
  if (!terms?.length) return <>{text}</>;
  const wanted = new Set(terms);
  const parts: ReactNode[] = [];
  let last = 0;
  for (const m of text.matchAll(WORD)) {
    if (!wanted.has(m[0].toLowerCase())) continue;
    parts.push(<Fragment key={`t${m.index}`}>{text.slice(last, m.index)}</Fragment>, <mark key={m.index}>{m[0]}</mark>);
    last = m.index + m[0].length;
  }
  parts.push(<Fragment key="end">{text.slice(last)}</Fragment>);
  return <>{parts}</>;
}

/** The matched lines boxed over the screenshot, in fractions of the image like the OCR boxes. */
export function FoundBoxes({ boxes }: { boxes: OcrBox[] }) {
  return (
    <svg className="overlay found-boxes" viewBox="0 0 1 1" preserveAspectRatio="none" aria-hidden="true">
      {boxes.map((b, i) => (
        <rect key={i} data-testid="found-box" x={b.x0} y={b.y0} width={b.x1 - b.x0} height={b.y1 - b.y0} vectorEffect="non-scaling-stroke" />
      ))}
    </svg>
  );
}

const FIELD_NAMES: Record<string, string> = { screen: "on the screen", thinking: "in the thinking", response: "in the raw response" };

/** The search's summary in the step panel: where the words are on this step, the goal when
 * it matched, the other steps that hold them, and a way back to the plain replay. */
export function FoundSummary({ found, episodeId, step }: { found: Found; episodeId: string; step: number }) {
  const { path, query } = useLocation();
  const here = found.steps.get(step) ?? {};
  const fields = Object.keys(here).map((f) => FIELD_NAMES[f] ?? f);
  const others = [...found.steps.keys()].sort((a, b) => a - b);
  const plain = new URLSearchParams(query);
  plain.delete(FIND);
  return (
    <section className="found" data-testid="found" aria-label={`search for ${found.words}`}>
      <p>
        Search <q>{found.words}</q>:{" "}
        {found.error ? (
          <span className="error">{found.error.message}</span>
        ) : found.loading ? (
          "looking…"
        ) : fields.length ? (
          <>found {fields.join(", ")} of step {step}.</>
        ) : (
          <>not on step {step}.</>
        )}{" "}
        <Link to={withQuery(path, plain)} data-testid="found-clear">
          clear
        </Link>
      </p>
      {found.goal && (
        <p className="found-goal" data-testid="found-goal">
          Goal: <Highlighted text={found.goal.snippet} terms={found.goal.terms} />
        </p>
      )}
      {others.length > 0 && (
        <nav aria-label="steps with matches" className="found-steps">
          Steps with matches:{" "}
          {others.map((n) => (
            <Link key={n} to={withQuery(`/episodes/${enc(episodeId)}/steps/${n}`, query)} aria-current={n === step ? "step" : undefined}>
              {n}
            </Link>
          ))}
        </nav>
      )}
    </section>
  );
}
