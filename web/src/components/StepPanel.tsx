// The right panel: what the model did at this step and why, and what it earned. Model text
// is rendered as text (React escapes it): never as HTML. Opened from a text search, it says
// where the words are and marks them in the thinking and the raw response.
import { useState } from "react";
import { api, call, type Annotation, type EpisodeDetail, type Step } from "../api/client";
import { invalidate } from "../api/queries";
import { useAction } from "../hooks";
import { useLeaveGuard } from "../router";
import { FoundSummary, Highlighted, type Found } from "./Found";
import { RoleNote, useMay } from "./Role";
import { SimilarScreens } from "./SimilarScreens";
import { ActionError } from "./Status";
import { Time } from "./Time";
import { toast } from "./Toasts";

const fmt = (v: number | null | undefined) => (v === null || v === undefined ? "—" : Number(v.toFixed(4)).toString());

export function StepPanel({ step, detail, found }: { step: Step; detail: EpisodeDetail; found?: Found | null }) {
  const may = useMay();
  const notes = detail.annotations.filter((a) => a.step === step.step);
  const hits = found?.steps.get(step.step);
  return (
    <div className="step-panel" data-testid="step-panel">
      {found && <FoundSummary found={found} episodeId={step.episode_id} step={step.step} />}
      <h3>
        Step {step.step} <span className={`action-tag action-${step.action_type}`}>{step.action_type ?? "unparsed"}</span>
        {step.action_valid === false && <span className="invalid">invalid</span>}
      </h3>
      {step.action_error && <p className="invalid-reason">{step.action_error}</p>}
      <dl className="kv">
        <dt>reward</dt>
        <dd>{fmt(step.reward)}</dd>
        <dt>step reward</dt>
        <dd className={step.step_reward === 0 ? "zero" : ""}>{fmt(step.step_reward)}</dd>
        {step.step_reward_reason && (
          <>
            <dt>reason</dt>
            <dd>{step.step_reward_reason}</dd>
          </>
        )}
        <dt>anchor</dt>
        <dd className="mono">{step.anchor_key ?? "—"}</dd>
        <dt>time</dt>
        <dd>
          <Time value={step.timestamp} seconds />
        </dd>
      </dl>
      <h4>Arguments</h4>
      <pre className="args" data-testid="action-args" tabIndex={0} aria-label="action arguments">{JSON.stringify(step.action ?? {}, null, 2)}</pre>
      <h4>Thinking</h4>
      <pre className="text" data-testid="thinking" tabIndex={0} aria-label="thinking">
        {step.thinking ? <Highlighted text={step.thinking} terms={hits?.thinking?.terms} /> : "—"}
      </pre>
      {/* keyed by whether the words are in it, so a match opens it and the user's choice holds otherwise */}
      <details key={hits?.response ? "found" : "plain"} open={hits?.response ? true : undefined}>
        <summary>Raw response</summary>
        <pre className="text" data-testid="raw-response" tabIndex={0} aria-label="raw response">
          <Highlighted text={step.model_response ?? ""} terms={hits?.response?.terms} />
        </pre>
      </details>
      <SimilarScreens step={step} />
      {step.image_url && (
        <p>
          <a href={`${step.image_url}?annotated=1`} target="_blank" rel="noreferrer">
            Server-rendered annotated image
          </a>
        </p>
      )}
      <h4>Annotations</h4>
      <ul className="annotations">
        {notes.map((a) => (
          <li key={a.annotation_id}>
            {a.label && <strong>{a.label} </strong>}
            {a.note}
            {may("curator") && (
              <button type="button" className="link" onClick={() => deleteAnnotation(a)} aria-label={`delete annotation ${a.label ?? a.note ?? ""}`}>
                delete
              </button>
            )}
          </li>
        ))}
      </ul>
      {may("curator") ? <AnnotationForm step={step} /> : <RoleNote need="curator" what="Annotating steps" testid="annotate-role-note" />}
    </div>
  );
}

/** Annotates and refreshes the episode, whose detail carries its annotations. */
async function annotate(episodeId: string, step: number | null | undefined, label: string | null, note: string | null) {
  await call(api.POST("/api/episodes/{episode_id}/annotations", { params: { path: { episode_id: episodeId } }, body: { step: step ?? null, label, note } }));
  void invalidate(["episode", episodeId]);
}

/** Delete, with an Undo that writes the annotation again. */
async function deleteAnnotation(a: Annotation) {
  try {
    await call(api.DELETE("/api/annotations/{annotation_id}", { params: { path: { annotation_id: a.annotation_id } } }));
    void invalidate(["episode", a.episode_id]);
    toast(`Deleted the annotation on step ${a.step ?? "—"}`, "ok", {
      label: "Undo",
      run: () => void annotate(a.episode_id, a.step, a.label ?? null, a.note ?? null).catch((e: Error) => toast(`Could not restore the annotation: ${e.message}`, "error")),
    });
  } catch (e) {
    toast(`Could not delete the annotation: ${(e as Error).message}`, "error");
  }
}

function AnnotationForm({ step }: { step: Step }) {
  const [label, setLabel] = useState("");
  const [note, setNote] = useState("");
  const action = useAction();
  useLeaveGuard(label.trim() || note.trim() ? `Your annotation of step ${step.step}` : null);
  const save = () =>
    action.run(async () => {
      await annotate(step.episode_id, step.step, label || null, note || null);
      setLabel("");
      setNote("");
      toast(`Annotated step ${step.step}`);
    });
  return (
    <div className="annotation-form">
      <input aria-label={`Label for step ${step.step}`} placeholder="label" value={label} onChange={(e) => setLabel(e.target.value)} />
      <input aria-label={`Note on step ${step.step}`} placeholder="note on this step" value={note} onChange={(e) => setNote(e.target.value)} />
      <button type="button" onClick={save} disabled={!label && !note}>
        Annotate step
      </button>
      <ActionError message={action.error} />
    </div>
  );
}
