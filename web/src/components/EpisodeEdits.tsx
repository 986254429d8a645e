// Repairs of what collection got wrong, on the replay: retask (a wrong task or goal), split
// before the step shown (an episode that ran two tasks), delete. Each asks first, runs as an
// edit job on the server (POST /api/episodes/{id}/retask | split, DELETE /api/episodes/{id})
// and offers Undo, which puts the tables back as they were (the older versions keep them
// until a purge). The lake has no user roles yet: anyone the server lets in may edit.
import { useState, type FormEvent } from "react";
import { api, call, type Schemas } from "../api/client";
import { invalidate } from "../api/queries";
import { useAction } from "../hooks";
import { enc, navigate } from "../router";
import { ask } from "./Dialogs";
import { ActionError } from "./Status";
import { toast } from "./Toasts";

type Edit = Schemas["EditResult"];

function undo(edit: Edit, back: string): () => void {
  return () =>
    void call(api.POST("/api/edits/{job_id}/undo", { params: { path: { job_id: edit.job_id } } })).then(
      () => {
        toast("Undone");
        void invalidate(["episode"], ["episodes"], ["tasks"]);
        navigate(back);
      },
      (e: Error) => toast(`Undo failed: ${e.message}`, "error"),
    );
}

export function EpisodeEdits({ episode, stepNo, firstStep }: { episode: Schemas["Episode"]; stepNo: number; firstStep: number }) {
  const id = episode.episode_id;
  const here = `/episodes/${enc(id)}/steps/${stepNo}`;
  const [task, setTask] = useState(episode.task_name ?? "");
  const [goal, setGoal] = useState(episode.task_goal ?? "");
  const action = useAction();

  const retask = (e: FormEvent) => {
    e.preventDefault();
    action.run(async () => {
      const yes = await ask({ title: "Retask this episode?", body: `${id} becomes task “${task}” with the goal “${goal}”. A new task takes it out of its group.`, confirm: "Retask" });
      if (!yes) return;
      const edit = await call(api.POST("/api/episodes/{episode_id}/retask", { params: { path: { episode_id: id } }, body: { task_name: task || null, task_goal: goal || null } }));
      toast(`Retasked ${id}`, "ok", { label: "Undo", run: undo(edit, here) });
      await invalidate(["episode", id], ["episodes"], ["tasks"]);
    });
  };

  const split = () =>
    action.run(async () => {
      const yes = await ask({ title: `Split before step ${stepNo}?`, body: `Steps ${stepNo} onward become a new episode; ${id} keeps the steps before (its outcome is cleared: the second part ends the run).`, confirm: "Split" });
      if (!yes) return;
      const edit = await call(api.POST("/api/episodes/{episode_id}/split", { params: { path: { episode_id: id } }, body: { at: stepNo } }));
      const part = edit.episode_ids.find((e) => e !== id) ?? id;
      toast(`Split: steps ${stepNo}+ are now ${part}`, "ok", { label: "Undo", run: undo(edit, here) });
      await invalidate(["episode"], ["episodes"], ["tasks"]);
      navigate(`/episodes/${enc(part)}/steps/0`);
    });

  const remove = () =>
    action.run(async () => {
      const yes = await ask({ title: "Delete this episode?", body: `${id} and its steps leave the lake's current version (older versions and tags keep them until a purge; Undo brings it back).`, confirm: "Delete episode", danger: true });
      if (!yes) return;
      const edit = await call(api.DELETE("/api/episodes/{episode_id}", { params: { path: { episode_id: id } } }));
      toast(`Deleted ${id}`, "ok", { label: "Undo", run: undo(edit, here) });
      await invalidate(["episodes"], ["tasks"]);
      navigate("/");
    });

  return (
    <details className="episode-edits" data-testid="episode-edits">
      <summary>Edit episode</summary>
      <form onSubmit={retask} className="episode-edits-form">
        <label className="field">
          task
          <input value={task} onChange={(e) => setTask(e.target.value)} aria-label="task name" maxLength={200} />
        </label>
        <label className="field">
          goal
          <textarea value={goal} onChange={(e) => setGoal(e.target.value)} aria-label="task goal" rows={2} />
        </label>
        <button type="submit" disabled={action.busy || (task === (episode.task_name ?? "") && goal === (episode.task_goal ?? ""))}>
          Retask
        </button>
      </form>
      <div className="inline-form">
        <button type="button" onClick={split} disabled={action.busy || stepNo <= firstStep} title="the step shown starts the new episode">
          Split before step {stepNo}
        </button>
        <button type="button" className="danger" onClick={remove} disabled={action.busy}>
          Delete episode
        </button>
      </div>
      <ActionError message={action.error} testid="edit-error" />
    </details>
  );
}
