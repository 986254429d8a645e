import { describe, expect, it } from "vitest";
import { episodesWhere, readByOutput, readByRun } from "./lineage";

describe("lineage links", () => {
  it("filters episodes by what read them, quoting the id as SQL text", () => {
    expect(readByOutput("exp-1")).toBe("episode_id IN (SELECT unnest(episode_ids) FROM lineage WHERE output = 'exp-1')");
    expect(readByRun("it's")).toContain("run_id = 'it''s'");
  });

  it("opens the episode list with the condition in the URL", () => {
    expect(episodesWhere("a = 'b'")).toBe("/?where=a%20%3D%20'b'");
  });
});
