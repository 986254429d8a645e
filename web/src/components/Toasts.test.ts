import { describe, expect, it } from "vitest";
import { stillRelevant } from "./Toasts";

type T = { text: string; kind: "ok" | "error" };
const ok = (text: string): T => ({ text, kind: "ok" });
const err = (text: string): T => ({ text, kind: "error" });

describe("toasts that stay", () => {
  it("drops an older error when anything new comes, so errors do not pile up", () => {
    expect(stillRelevant([err("a"), ok("saved")], "b")).toEqual([ok("saved")]);
  });

  it("never shows the same text twice", () => {
    expect(stillRelevant([ok("Saved"), ok("Undone")], "Saved")).toEqual([ok("Undone")]);
  });
});
