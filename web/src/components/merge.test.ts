import { describe, expect, it } from "vitest";
import { changes, conflicts, edit, keepMine, same, shown, takeTheirs, type Edits } from "./merge";

const v1 = { name: "fails", description: "old words", kind: "failure" };

describe("editing a row a teammate saves meanwhile", () => {
  it("keeps the user's edits and follows the stored row elsewhere", () => {
    const edits = edit({}, "description", "alice's words", v1.description);
    const v2 = { ...v1, name: "renamed by bob" };
    expect(shown(edits, v2, "description")).toBe("alice's words");
    expect(shown(edits, v2, "name")).toBe("renamed by bob");
    expect(conflicts(edits, v2)).toEqual([]);
    // only the edited field is sent: bob's name is not written back
    expect(changes(edits, v2)).toEqual({ description: "alice's words" });
  });

  it("makes a field both changed a conflict until one side is taken", () => {
    const edits = edit({}, "description", "alice's words", v1.description);
    const v2 = { ...v1, description: "bob's words" };
    expect(conflicts(edits, v2)).toEqual(["description"]);
    const kept = keepMine(edits, "description", v2.description);
    expect(conflicts(kept, v2)).toEqual([]);
    expect(changes(kept, v2)).toEqual({ description: "alice's words" });
    const taken = takeTheirs(edits, "description");
    expect(conflicts(taken, v2)).toEqual([]);
    expect(shown(taken, v2, "description")).toBe("bob's words");
    expect(changes(taken, v2)).toEqual({});
  });

  it("sees no conflict when both made the same change", () => {
    const edits = edit({}, "kind", "eval", v1.kind);
    expect(conflicts(edits, { ...v1, kind: "eval" })).toEqual([]);
    expect(changes(edits, { ...v1, kind: "eval" })).toEqual({});
  });

  it("remembers what a field held when editing began, through later keys", () => {
    let edits: Edits = edit({}, "name", "f", v1.name);
    edits = edit(edits, "name", "fa", "renamed meanwhile");
    expect(edits.name.from).toBe("fails");
    // typed back to the stored value: no edit left
    expect(edit(edit({}, "name", "x", "fails"), "name", "fails", "fails")).toEqual({});
  });

  it("compares objects by value and empty text as a cleared field", () => {
    expect(same({ a: 1, b: null }, { a: 1 })).toBe(true);
    expect(same({ task: "a", success: false }, { success: false, task: "a" })).toBe(true);
    expect(same("", null)).toBe(true);
    expect(same({ task: "a" }, { task: "b" })).toBe(false);
  });
});
