// The episode filter in the sidebar: outcome and a zero-step-reward flag at hand, the rest
// under "more filters" (a form that fits the sidebar's width; the set picked by its name).
import { useState, type FormEvent } from "react";
import { useQuery } from "@tanstack/react-query";
import { queries } from "../api/queries";
import { useAddressValue } from "../hooks";
import { navigate, useLocation, withQuery } from "../router";

const FIELDS: [string, string][] = [
  ["task", "task"],
  ["search", "id, task or goal text"],
  ["policy_version", "policy version"],
  ["run_id", "run"],
  ["env", "env"],
  ["tag", "tag"],
  ["min_length", "min length"],
  ["max_length", "max length"],
];

export function FilterBar() {
  const { path, query } = useLocation();
  const [open, setOpen] = useState(false);
  const set = (changes: Record<string, string | null>) => {
    const q = new URLSearchParams(query);
    for (const [k, v] of Object.entries(changes)) {
      if (v === null || v === "") q.delete(k);
      else q.set(k, v);
    }
    navigate(withQuery(path, q));
  };
  const inAddress = query.get("unjudged") === "true" ? "unjudged" : (query.get("success") ?? "");
  const [outcome, setOutcome] = useAddressValue(inAddress, inAddress);
  const zeroInAddress = query.get("zero_step_reward") === "true";
  const [zero, setZero] = useAddressValue(zeroInAddress, String(zeroInAddress));
  const submit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget);
    const changes: Record<string, string | null> = {};
    for (const [k] of FIELDS) changes[k] = String(data.get(k) ?? "");
    changes.set_id = String(data.get("set_id") ?? "");
    changes.where = String(data.get("where") ?? "");
    set(changes);
  };
  return (
    <div className="filters" data-testid="filters">
      <div className="filter-row">
        <select
          value={outcome}
          aria-label="outcome"
          onChange={(e) => {
            const v = e.target.value;
            setOutcome(v);
            set({ success: v === "true" || v === "false" ? v : null, unjudged: v === "unjudged" ? "true" : null });
          }}
        >
          <option value="">all outcomes</option>
          <option value="true">successes</option>
          <option value="false">failures</option>
          <option value="unjudged">unjudged</option>
        </select>
        <label title="some step has step_reward = 0">
          <input
            type="checkbox"
            checked={zero}
            onChange={(e) => {
              setZero(e.target.checked);
              set({ zero_step_reward: e.target.checked ? "true" : null });
            }}
          />
          0 step reward
        </label>
        <button type="button" className="link" onClick={() => setOpen(!open)} aria-expanded={open}>
          {open ? "fewer filters" : "more filters"}
        </button>
      </div>
      {open && (
        <form onSubmit={submit} key={query.toString()}>
          {FIELDS.map(([k, label]) => (
            <label key={k} className="field">
              {label}
              <input name={k} defaultValue={query.get(k) ?? ""} />
            </label>
          ))}
          <SetPicker current={query.get("set_id") ?? ""} />
          <label className="field wide">
            SQL condition over episodes
            <textarea name="where" placeholder="e.g. episode_reward > 0.5" defaultValue={query.get("where") ?? ""} />
          </label>
          <button type="submit">Apply</button>
          <button type="button" onClick={() => navigate(path)}>
            Clear
          </button>
        </form>
      )}
    </div>
  );
}

/** The set filter: live sets by name (the id is what goes in the URL); a set the URL names
 * that is not among them (deleted, or not loaded yet) stays a choice under its id. */
function SetPicker({ current }: { current: string }) {
  const sets = useQuery(queries.sets());
  const known = sets.data?.some((s) => s.set_id === current);
  return (
    <label className="field">
      set
      <select name="set_id" aria-label="set" defaultValue={current} key={`${current}:${sets.data?.length ?? 0}`}>
        <option value="">{sets.error ? "sets did not load" : "any set"}</option>
        {current && !known && <option value={current}>{current}</option>}
        {sets.data?.map((s) => (
          <option key={s.set_id} value={s.set_id}>
            {s.name}
          </option>
        ))}
      </select>
    </label>
  );
}
