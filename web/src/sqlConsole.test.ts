import { describe, expect, it } from "vitest";
import { ApiError } from "./api/client";
import {
  chartColumns,
  chartSeries,
  chartableColumns,
  completions,
  elapsedText,
  HISTORY_MAX,
  loadHistory,
  remember,
  sortRows,
  sqlFailure,
  stepColumns,
  wordBefore,
  type HistoryEntry,
} from "./sqlConsole";

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
    let h: HistoryEntry[] = [];
    h = remember(h, "select 1");
    h = remember(h, "select 2 ");
    h = remember(h, "select 1");
    expect(h.map((e) => e.query)).toEqual(["select 1", "select 2"]);
    expect(remember(h, "   ")).toBe(h);
    for (let i = 0; i < 30; i++) h = remember(h, `select ${i + 10}`);
    expect(h.length).toBe(HISTORY_MAX);
    expect(h[0].query).toBe("select 39");
  });

  it("keeps failed queries too, marked, with the latest outcome of a query run again", () => {
    let h = remember([], "select nope from nowhere", true);
    h = remember(h, "select 1");
    expect(h).toEqual([{ query: "select 1", failed: false }, { query: "select nope from nowhere", failed: true }]);
    h = remember(h, "select nope from nowhere", false);
    expect(h[0]).toEqual({ query: "select nope from nowhere", failed: false });
  });

  it("reads the history earlier builds kept (the queries' text alone)", () => {
    const kept = new Map<string, string>(); // the browser's storage, in Node
    globalThis.localStorage = { getItem: (k: string) => kept.get(k) ?? null, setItem: (k: string, v: string) => void kept.set(k, v) } as Storage;
    localStorage.setItem("elake.sql.history", JSON.stringify(["select 1", { query: "select x", failed: true }, 7]));
    expect(loadHistory()).toEqual([{ query: "select 1", failed: false }, { query: "select x", failed: true }]);
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

describe("a chart of a result", () => {
  const columns = [
    { name: "task_name", type: "VARCHAR" },
    { name: "episodes", type: "BIGINT" },
    { name: "rate", type: "DOUBLE" },
    { name: "ok", type: "BOOLEAN" },
  ];
  const rows = [
    ["wifi_on", 3, 0.5, true],
    ["set_alarm", 2, null, false],
    [null, 1, 1, null],
  ];

  it("charts any column along x and only numbers up", () => {
    expect(chartableColumns(columns, rows)).toEqual({ x: [0, 1, 2, 3], y: [1, 2] });
    // a type it does not know counts as numbers when every value is one
    const odd = [{ name: "n", type: "UNKNOWN" }, { name: "s", type: "UNKNOWN" }, { name: "e", type: "UNKNOWN" }];
    expect(chartableColumns(odd, [[1, "a", null], [2.5, 3, null]]).y).toEqual([0]);
    expect(chartableColumns([{ name: "task_name", type: "VARCHAR" }], [["a"]]).y).toEqual([]);
  });

  it("picks text along x and the first numbers up, or the columns asked for", () => {
    expect(chartColumns(columns, rows)).toEqual({ x: 0, y: 1 });
    expect(chartColumns(columns, rows, "episodes", "rate")).toEqual({ x: 1, y: 2 });
    // a name the result lacks, or text asked for up, falls back to the first choice
    expect(chartColumns(columns, rows, "gone", "task_name")).toEqual({ x: 0, y: 1 });
    const numbers = [{ name: "step", type: "INTEGER" }, { name: "reward", type: "DOUBLE" }];
    expect(chartColumns(numbers, [[0, 1]])).toEqual({ x: 0, y: 1 });
    expect(chartColumns([{ name: "n", type: "BIGINT" }], [[1]])).toEqual({ x: 0, y: 0 });
    expect(chartColumns([{ name: "t", type: "VARCHAR" }], [["a"]])).toBeNull();
  });

  it("draws text x values as categories in the result's order, NULL named, gaps for non-numbers", () => {
    expect(chartSeries(columns, rows, 0, 2)).toEqual({ x: ["wifi_on", "set_alarm", "NULL"], values: [0.5, null, 1], categories: true, dropped: 0 });
    expect(chartSeries(columns, rows, 3, 1).x).toEqual(["true", "false", "NULL"]);
  });

  it("sorts numbers along x by value and leaves out rows without one", () => {
    const steps = [{ name: "step", type: "INTEGER" }, { name: "reward", type: "DOUBLE" }];
    const s = chartSeries(steps, [[2, 0.5], [0, 0], [null, 9], [1, "nan"]], 0, 1);
    expect(s).toEqual({ x: [0, 1, 2], values: [0, null, 0.5], categories: false, dropped: 1 });
  });
});
