import { describe, expect, it } from "vitest";
import { filtersFromQuery, queryFromFilters, sameFilters } from "./filters";

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

  it("tells a saved view's filters from the address bar's when they differ", () => {
    const saved = { task: "wifi_on", success: false, unjudged: false, env: null, min_length: 3 };
    expect(sameFilters(saved, filtersFromQuery(new URLSearchParams("min_length=3&task=wifi_on&success=false&view=v-1")))).toBe(true);
    expect(sameFilters(saved, filtersFromQuery(new URLSearchParams("task=wifi_on&success=true&min_length=3")))).toBe(false);
    expect(sameFilters(saved, filtersFromQuery(new URLSearchParams("task=wifi_on&min_length=3")))).toBe(false); // success=false dropped
    expect(sameFilters(saved, { ...saved, tag: "smoke" })).toBe(false);
    expect(sameFilters({}, { unjudged: false, zero_step_reward: false, where: "" })).toBe(true);
  });
});
