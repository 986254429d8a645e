import { describe, expect, it } from "vitest";
import { NONE_TICKED, tick } from "./selection";

const shown = ["a", "b", "c", "d", "e", "f"];
const ids = (t: { ids: ReadonlySet<string> }) => [...t.ids].sort();

describe("ticking episodes", () => {
  it("ticks and unticks one with a click", () => {
    const one = tick(shown, NONE_TICKED, "b", false);
    expect(ids(one)).toEqual(["b"]);
    expect(one.anchor).toBe("b");
    const none = tick(shown, one, "b", false);
    expect(ids(none)).toEqual([]);
    expect(none.anchor).toBeNull();
  });

  it("ticks the range from the last ticked with a shift-click, either way", () => {
    const down = tick(shown, tick(shown, NONE_TICKED, "b", false), "e", true);
    expect(ids(down)).toEqual(["b", "c", "d", "e"]);
    const up = tick(shown, tick(shown, NONE_TICKED, "e", false), "b", true);
    expect(ids(up)).toEqual(["b", "c", "d", "e"]);
  });

  it("keeps what was ticked outside the range, and ranges on from the shift-clicked one", () => {
    let t = tick(shown, NONE_TICKED, "a", false);
    t = tick(shown, t, "c", false);
    t = tick(shown, t, "d", true);
    expect(ids(t)).toEqual(["a", "c", "d"]);
    t = tick(shown, t, "f", true);
    expect(ids(t)).toEqual(["a", "c", "d", "e", "f"]);
  });

  it("ticks just the one when nothing was ticked or the last ticked is no longer shown", () => {
    expect(ids(tick(shown, NONE_TICKED, "c", true))).toEqual(["c"]);
    const gone = tick(shown, { ids: new Set(["x"]), anchor: "x" }, "c", true);
    expect(ids(gone)).toEqual(["c", "x"]);
  });
});
