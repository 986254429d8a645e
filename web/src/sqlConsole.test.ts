import { describe, expect, it } from "vitest";
import { ApiError } from "./api/client";
import { completions, elapsedText, HISTORY_MAX, remember, sortRows, sqlFailure, stepColumns, wordBefore } from "./sqlConsole";

describe("the SQL console", () => {
  it("says a failure once, without the type and the server's prefix", () => {
    const e = new ApiError(400, "SqlRefused: query failed: Binder Error: column x not found", "SqlRefused");
    expect(sqlFailure(e)).toBe("Binder Error: column x not found");
    expect(sqlFailure(new ApiError(0, "the server did not answer (TypeError)"))).toBe("the server did not answer (TypeError)");
  });

  it("shows a running time", () => {
    expect(elapsedText(1234)).toBe("1.2 s");
    expect(elapsedText(75_000)).toBe("1 min 15 s");
  });

  it("sorts numbers by value and text by letters, NULLs last both ways, ties in their order", () => {
    const rows = [[10, "b"], [null, "a"], [9, "c"], [10, "a"], [100, null]];
    expect(sortRows(rows, 0, false)).toEqual([2, 0, 3, 4, 1]);
    expect(sortRows(rows, 0, true)).toEqual([4, 0, 3, 2, 1]);
    expect(sortRows(rows, 1, false)).toEqual([1, 3, 0, 2, 4]);
    expect(sortRows(rows, 1, true)).toEqual([2, 0, 1, 3, 4]);
  });

  it("finds a step in a row only when both its columns are there", () => {
    expect(stepColumns(["task_name", "episode_id", "step"])).toEqual([1, 2]);
    expect(stepColumns(["episode_id", "n"])).toBeNull();
  });

  it("remembers queries newest first, once each, up to its size", () => {
    let h: string[] = [];
    h = remember(h, "select 1");
    h = remember(h, "select 2 ");
    h = remember(h, "select 1");
    expect(h).toEqual(["select 1", "select 2"]);
    expect(remember(h, "   ")).toBe(h);
    for (let i = 0; i < 30; i++) h = remember(h, `select ${i + 10}`);
    expect(h.length).toBe(HISTORY_MAX);
    expect(h[0]).toBe("select 39");
  });

  it("completes the word at the cursor with table and column names", () => {
    expect(wordBefore("select task_na from", 14)).toEqual({ start: 7, word: "task_na" });
    expect(wordBefore("select ", 7)).toEqual({ start: 7, word: "" });
    const tables = [
      { name: "episodes", columns: [{ name: "episode_id" }, { name: "task_name" }] },
      { name: "steps", columns: [{ name: "episode_id" }, { name: "step" }] },
    ];
    expect(completions("ep", tables)).toEqual(["episodes", "episode_id"]);
    expect(completions("STE", tables)).toEqual(["steps", "step"]);
    expect(completions("step", tables)).toEqual(["steps"]);
    expect(completions("", tables)).toEqual([]);
  });
});
