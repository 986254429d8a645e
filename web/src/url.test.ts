import { describe, expect, it } from "vitest";
import { enc, withQuery } from "./url";

describe("paths that keep the filters", () => {
  it("appends the query only when there is one", () => {
    expect(withQuery("/episodes", new URLSearchParams())).toBe("/episodes");
    expect(withQuery("/episodes", new URLSearchParams({ task: "a b", success: "true" }))).toBe("/episodes?task=a+b&success=true");
  });

  it("escapes an id that holds a slash or a colon as one path segment", () => {
    expect(`/episodes/${enc("run:1/ep 2")}`).toBe("/episodes/run%3A1%2Fep%202");
  });
});
