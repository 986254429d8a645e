import { describe, expect, it } from "vitest";
import { alignOf, compareUrl, comparedIds } from "./compareUrl";

describe("Compare's address", () => {
  it("keeps the alignment step when there is one", () => {
    expect(compareUrl(["a", "b/c"], 2)).toBe("/compare/a/b%2Fc?step=2");
    expect(compareUrl(["a", "b"], 1, 2)).toBe("/compare/a/b?step=1&align=2");
    expect(compareUrl(["a"], 0, 0)).toBe("/compare/a?step=0&align=0");
    expect(comparedIds("/compare/a/b%2Fc/a")).toEqual(["a", "b/c"]);
  });

  it("reads an alignment step only when it is a step number", () => {
    expect(alignOf(new URLSearchParams("step=1&align=3"))).toBe(3);
    expect(alignOf(new URLSearchParams("align=0"))).toBe(0);
    for (const bad of ["", "align=", "align=-1", "align=1.5", "align=x"]) expect(alignOf(new URLSearchParams(bad))).toBeNull();
  });
});
