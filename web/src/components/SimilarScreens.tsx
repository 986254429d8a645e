// "Screens like this": the steps whose screenshots lie nearest to this step's (GET
// .../steps/{n}/similar), from every episode, run and policy version, each a link to that
// step. Asked for only once opened; it follows the replay from step to step, and into the
// episode a row opens, while open (remembered in the browser, like the overlay toggle).
// A step whose screenshot has no embedding yet shows the API's answer, which names the
// command that computes it, rather than an empty list.
import { useId, useState } from "react";
import { useQuery } from "@tanstack/react-query";
import { imageSrc, type Step } from "../api/client";
import { queries } from "../api/queries";
import { Link, enc } from "../router";
import { Async } from "./Status";

const OPEN_KEY = "elake.similar";
/** How many neighbours the list shows. */
const K = 8;
/** Thumbnails at twice their 48 px width, sharp on high-density screens. */
const THUMB_SIDE = 192;

export function SimilarScreens({ step }: { step: Step }) {
  const [open, setOpen] = useState(() => localStorage.getItem(OPEN_KEY) === "open");
  const toggle = () => {
    localStorage.setItem(OPEN_KEY, open ? "closed" : "open");
    setOpen(!open);
  };
  const list = useId();
  const similar = useQuery({ ...queries.similar(step.episode_id, step.step, K), enabled: open && !!step.image_url });
  return (
    <section className="similar" data-testid="similar">
      <button type="button" aria-expanded={open} aria-controls={list} onClick={toggle} data-testid="similar-toggle">
        {open ? "Hide screens like this" : "Screens like this"}
      </button>
      {open && (
        <div id={list}>
          {!step.image_url ? (
            <p className="muted">Step {step.step} has no screenshot to compare.</p>
          ) : (
            <Async state={similar} what={`screens like step ${step.step}`}>
              {(rows) =>
                rows.length === 0 ? (
                  <p className="muted">No other step has an embedded screenshot.</p>
                ) : (
                  <ol className="similar-list" aria-label={`screens like step ${step.step}, nearest first`}>
                    {rows.map((r) => (
                      <li key={`${r.episode_id}/${r.step}`} data-episode={r.episode_id} data-step={r.step}>
                        <Link to={`/episodes/${enc(r.episode_id)}/steps/${r.step}`}>
                          <img src={imageSrc(r.image_url, THUMB_SIDE)} alt="" decoding="async" />
                          <span className="similar-what">
                            <span className="mono">{r.episode_id}</span> · step {r.step}
                            <span className="muted similar-where">
                              {[r.task_name, r.policy_version && `policy ${r.policy_version}`, r.run_id && `run ${r.run_id}`].filter(Boolean).join(" · ")}
                            </span>
                          </span>
                          <span className="similar-distance" title="distance between the screenshots' embeddings: 0 is the same screen, 2 the most different">
                            {r.distance.toFixed(3)}
                          </span>
                        </Link>
                      </li>
                    ))}
                  </ol>
                )
              }
            </Async>
          )}
        </div>
      )}
    </section>
  );
}
