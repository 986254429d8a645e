// The right panel: what the model did at this step and why, and what it earned. Model text
// is rendered as text (React escapes it): never as HTML.
import { useState } from "react";
import { api, call, type EpisodeDetail, type Step } from "../api/client";
import { useAction } from "../hooks";
import { ActionError } from "./Status";

const fmt = (v: number | null | undefined) => (v === null || v === undefined ? "—" : Number(v.toFixed(4)).toString());

export function StepPanel({ step, detail, onChanged }: { step: Step; detail: EpisodeDetail; onChanged: () => void }) {
  const notes = detail.annotations.filter((a) => a.step === step.step);
  return (
    <div className="step-panel" data-testid="step-panel">
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
        <dd>{step.timestamp ?? "—"}</dd>
      </dl>
      <h4>Arguments</h4>
      <pre className="args" data-testid="action-args">{JSON.stringify(step.action ?? {}, null, 2)}</pre>
      <h4>Thinking</h4>
      <pre className="text" data-testid="thinking">{step.thinking || "—"}</pre>
      <details>
        <summary>Raw response</summary>
        <pre className="text" data-testid="raw-response">{step.model_response}</pre>
      </details>
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
            <button
              type="button"
              className="link"
              onClick={() => call(api.DELETE("/api/annotations/{annotation_id}", { params: { path: { annotation_id: a.annotation_id } } })).then(onChanged)}
            >
              delete
            </button>
          </li>
        ))}
      </ul>
      <AnnotationForm step={step} onSaved={onChanged} />
    </div>
  );
}

function AnnotationForm({ step, onSaved }: { step: Step; onSaved: () => void }) {
  const [label, setLabel] = useState("");
  const [note, setNote] = useState("");
  const action = useAction();
  const save = () =>
    action.run(async () => {
      await call(
        api.POST("/api/episodes/{episode_id}/annotations", {
          params: { path: { episode_id: step.episode_id } },
          body: { step: step.step, label: label || null, note: note || null },
        }),
      );
      setLabel("");
      setNote("");
      onSaved();
    });
  return (
    <div className="annotation-form">
      <input placeholder="label" value={label} onChange={(e) => setLabel(e.target.value)} />
      <input placeholder="note on this step" value={note} onChange={(e) => setNote(e.target.value)} />
      <button type="button" onClick={save} disabled={!label && !note}>
        Annotate step
      </button>
      <ActionError message={action.error} />
    </div>
  );
}
