import { describe, expect, it } from "vitest";
import { filtersFromQuery, queryFromFilters } from "./filters";

describe("episode filters in the URL", () => {
  it("reads text, number and flag fields under the API's names", () => {
    const f = filtersFromQuery(new URLSearchParams("task=open_app&min_length=3&success=false&unjudged=true&colour=red"));
    expect(f).toEqual({ task: "open_app", min_length: 3, success: false, unjudged: true });
  });

  it("drops a number that is not one and a flag that is not true", () => {
    expect(filtersFromQuery(new URLSearchParams("max_length=ten&zero_step_reward=yes&success=maybe"))).toEqual({});
  });

  it("round-trips through the query string, leaving unset fields out", () => {
    const f = { task: "t", success: false, min_length: 2, where: "episode_length > 3", unjudged: false, env: "" };
    const q = queryFromFilters(f);
    expect(q.has("unjudged")).toBe(false);
    expect(q.has("env")).toBe(false);
    expect(q.get("success")).toBe("false"); // success=false is a filter, not an unset flag
    expect(filtersFromQuery(q)).toEqual({ task: "t", success: false, min_length: 2, where: "episode_length > 3" });
  });
});
