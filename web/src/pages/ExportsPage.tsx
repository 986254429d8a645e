// /exports: start an export with the main options of the export spec, and follow every
// export: progress while it runs, a download link once finished, a delete button (after a
// confirmation) once it no longer runs. The server picks the folder.
import type { ChangeEvent, FormEvent } from "react";
import { useQuery } from "@tanstack/react-query";
import { ApiError, api, call, type ExportCreate, type ExportSummary } from "../api/client";
import { invalidate, queries } from "../api/queries";
import { ask } from "../components/Dialogs";
import { JobState } from "../components/JobState";
import { ListTable } from "../components/ListTable";
import { Options } from "../components/Options";
import { RoleNote, useMay } from "../components/Role";
import { ActionError, Async } from "../components/Status";
import { Time } from "../components/Time";
import { toast } from "../components/Toasts";
import { useAction, useTitle } from "../hooks";
import { episodesWhere, readByOutput } from "../lineage";
import { Link } from "../router";

const TEXT_FIELDS = ["set", "where", "tag", "granularity", "name"] as const;
const NUMBER_FIELDS = ["history_length", "history_images", "max_pixels", "val_fraction", "seed"] as const;
const FLAGS = ["include_failed", "good_steps_only"] as const;

/** The spec from the form: the format and the fields filled in. Fields left empty take the
 * server's defaults (the generated type lists defaulted fields as required, hence the cast). */
function specFromForm(form: FormData): ExportCreate {
  const text = (name: string) => String(form.get(name) ?? "").trim();
  const spec: Record<string, string | number | boolean> = { format: text("format") };
  for (const name of TEXT_FIELDS) if (text(name)) spec[name] = text(name);
  for (const name of NUMBER_FIELDS) if (text(name)) spec[name] = Number(text(name));
  for (const name of FLAGS) if (form.get(name)) spec[name] = true;
  return spec as unknown as ExportCreate;
}

/** What an export selected, in a few words: set, condition, tag, outcome filter. */
function describe(selection: ExportSummary["selection"]): string {
  if (!selection) return "";
  const set = selection.set as { name?: string } | null | undefined;
  const parts = [
    set?.name ? `set ${set.name}` : "",
    selection.where ? `where ${String(selection.where)}` : "",
    selection.tag ? `tag ${String(selection.tag)}` : "",
    selection.include_failed ? "failed kept" : "successes only",
    selection.granularity ? `per ${String(selection.granularity)}` : "",
  ];
  return parts.filter(Boolean).join(" · ");
}

/** What an export's files hold, in their own unit: samples, pairs (dpo) or episodes
 * (clawgui), as the manifest's `counts.unit` names it. */
function samples(e: ExportSummary): string {
  const split = e.counts?.samples as { train?: number; val?: number } | undefined;
  const unit = typeof e.counts?.unit === "string" && e.counts.unit !== "samples" ? ` ${e.counts.unit}` : "";
  if (split) return `${split.train ?? 0} train + ${split.val ?? 0} val${unit}`;
  return e.samples == null ? "—" : `${e.samples}${unit}`;
}

/** An empty selection explained in the form's words: what the form selected, and the
 * checkbox that widens it (the server's message names the command line's flag). */
function explain(error: unknown, spec: ExportCreate, setName: string | undefined): Error {
  if (!(error instanceof ApiError) || error.type !== "EmptySelection") return error as Error;
  const parts = [
    setName ? `set ${setName}` : "the whole lake",
    spec.where ? `where ${spec.where}` : "",
    spec.include_failed ? "" : "successful episodes only",
    spec.good_steps_only ? "steps with step reward 1 only" : "",
  ].filter(Boolean);
  const hint = spec.include_failed ? "Widen the selection." : "Failed episodes are left out: tick “keep failed episodes” to include them.";
  return new Error(`EmptySelection: no step matches ${parts.join(", ")}. ${hint}`);
}

export function ExportsPage() {
  const exports = useQuery(queries.exports());
  const formats = useQuery(queries.exportFormats());
  const sets = useQuery(queries.sets());
  const health = useQuery(queries.health());
  const action = useAction();
  const may = useMay();
  useTitle("Exports");
  const remove = async (e: ExportSummary) => {
    const yes = await ask({
      title: `Delete export ${e.export_id}?`,
      body: "Its files are deleted from the server; its record stays, marked deleted. This cannot be undone.",
      confirm: "Delete",
      danger: true,
    });
    if (!yes) return;
    action.run(async () => {
      await call(api.DELETE("/api/exports/{export_id}", { params: { path: { export_id: e.export_id } } }));
      toast(`Deleted export ${e.export_id}`);
      void invalidate(["exports"]);
    });
  };
  const start = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const spec = specFromForm(new FormData(e.currentTarget));
    const setName = sets.data?.find((s) => s.set_id === spec.set)?.name ?? spec.set ?? undefined;
    action.run(async () => {
      try {
        await call(api.POST("/api/exports", { body: spec }));
      } catch (error) {
        throw explain(error, spec, setName);
      }
      toast("Export started");
      void invalidate(["exports"]);
    });
  };
  // A failure or regression set is curated to be exported with its failures: choosing one
  // ticks "keep failed episodes" (which the user can untick); leaving it filtered to
  // successes would export nothing, or only the episodes the set was not made for.
  const keepFailuresOfFailureSets = (e: ChangeEvent<HTMLSelectElement>) => {
    const chosen = sets.data?.find((s) => s.set_id === e.currentTarget.value);
    const box = e.currentTarget.form?.elements.namedItem("include_failed");
    if (chosen && box instanceof HTMLInputElement) box.checked = chosen.kind === "failure" || chosen.kind === "regression";
  };
  return (
    <main className="page" data-testid="exports-page">
      <h2>Exports</h2>
      <form className="export-form" onSubmit={start} data-testid="export-form">
        <label>
          format
          <select name="format" required aria-label="format">
            {formats.data?.map((f) => (
              <option key={f.name} value={f.name} title={f.summary}>
                {f.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          set
          <select name="set" defaultValue="" aria-label="set" onChange={keepFailuresOfFailureSets}>
            <option value="">whole lake</option>
            {sets.data?.map((s) => (
              <option key={s.set_id} value={s.set_id}>
                {s.name} ({s.members})
              </option>
            ))}
          </select>
        </label>
        <label>
          lake tag
          <select name="tag" defaultValue="" aria-label="tag">
            <option value="">latest (or the set's pinned tag)</option>
            <Options values={health.data?.tags} />
          </select>
        </label>
        <label>
          granularity
          <select name="granularity" defaultValue="" aria-label="granularity">
            <option value="">default</option>
            <option value="step">one sample per step</option>
            <option value="episode">one conversation per episode</option>
          </select>
        </label>
        <label className="wide">
          where
          <input name="where" placeholder="SQL over episodes JOIN steps, e.g. task_name = 'wifi_on'" aria-label="where" />
        </label>
        <label>
          history steps
          <input name="history_length" type="number" min={0} placeholder="all" aria-label="history_length" />
        </label>
        <label>
          history screenshots
          <input name="history_images" type="number" min={0} placeholder="default" aria-label="history_images" />
        </label>
        <label>
          max pixels
          <input name="max_pixels" type="number" min={4096} placeholder="as stored" aria-label="max_pixels" />
        </label>
        <label>
          validation share
          <input name="val_fraction" type="number" min={0} max={0.99} step={0.05} placeholder="default" aria-label="val_fraction" />
        </label>
        <label>
          seed
          <input name="seed" type="number" min={0} placeholder="default" aria-label="seed" />
        </label>
        <label>
          dataset name
          <input name="name" placeholder="default" aria-label="name" />
        </label>
        <label className="check">
          <input name="include_failed" type="checkbox" /> keep failed episodes
        </label>
        <label className="check">
          <input name="good_steps_only" type="checkbox" /> only steps with step reward 1
        </label>
        <button type="submit" disabled={action.busy || !formats.data || !may("curator")} aria-describedby={may("curator") ? undefined : "export-role-note"}>
          {action.busy ? "Starting…" : "Start export"}
        </button>
      </form>
      {!may("curator") && (
        <div id="export-role-note">
          <RoleNote need="curator" what="Starting an export" testid="export-role-note" />
        </div>
      )}
      <ActionError message={action.error} testid="export-error" />
      <Async state={exports} what="exports">
        {(list) => (
          <ListTable
            testid="exports"
            columns={["export", "format", "status", "count", "selection", "started", ""]}
            items={list}
            row={(e) => (
              <tr key={e.export_id} data-export={e.export_id}>
                <td className="mono">{e.export_id}</td>
                <td>{e.format ?? "—"}</td>
                <td>
                  <JobState status={e.status} progress={e.progress} error={e.error} />
                </td>
                <td>
                  {samples(e)}
                  {e.status === "finished" && (
                    <>
                      {" "}
                      <Link to={episodesWhere(readByOutput(e.export_id))} data-testid="export-episodes">
                        episodes
                      </Link>
                    </>
                  )}
                </td>
                <td>{describe(e.selection)}</td>
                <td>
                  <Time value={e.created_at} />
                </td>
                <td>
                  {e.download_url && (
                    <a href={e.download_url} download data-testid="download">
                      download zip
                    </a>
                  )}{" "}
                  {may("admin") && e.status !== "running" && e.status !== "queued" && e.status !== "deleted" && (
                    <button type="button" onClick={() => void remove(e)} disabled={action.busy} data-testid="delete-export" aria-label={`delete export ${e.export_id}`}>
                      delete
                    </button>
                  )}
                </td>
              </tr>
            )}
            empty={
              <>
                No exports yet: start one above, or with <span className="mono">elake export sft</span>.
              </>
            }
          />
        )}
      </Async>
    </main>
  );
}
