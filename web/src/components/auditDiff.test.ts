import { describe, expect, it } from "vitest";
import { fieldChanges } from "./auditDiff";

describe("an audit row's changes", () => {
  it("names each field that changed, before and after", () => {
    const before = { set_id: "s", name: "fails", description: "old", updated_at: "t1" };
    const after = { set_id: "s", name: "fails", description: "new", updated_at: "t2" };
    expect(fieldChanges(before, after)).toEqual([{ field: "description", before: "old", after: "new" }]);
  });

  it("shows a creation's fields and a removal's as one side only", () => {
    expect(fieldChanges(null, { episode_id: "e", failure_category: "grounding", failing_step: 2, note: null })).toEqual([
      { field: "failure_category", before: "", after: "grounding" },
      { field: "failing_step", before: "", after: "2" },
    ]);
    expect(fieldChanges({ failure_category: "planning" }, null)).toEqual([{ field: "failure_category", before: "planning", after: "" }]);
  });

  it("shows empty and cleared values as a dash", () => {
    expect(fieldChanges({ note: "x" }, { note: null })).toEqual([{ field: "note", before: "x", after: "—" }]);
  });
});
