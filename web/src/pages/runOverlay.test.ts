import { describe, expect, it } from "vitest";
import { align, configDiff, overlayFromQuery, smooth } from "./runOverlay";

describe("overlaying runs", () => {
  it("smooths with a trailing window, skipping gaps", () => {
    expect(smooth([1, 2, 3, 4], 1)).toEqual([1, 2, 3, 4]);
    expect(smooth([1, 3, null, 5], 2)).toEqual([1, 2, null, 5]);
    expect(smooth([0, 0, 3, 3], 3)).toEqual([0, 0, 1, 2]);
  });

  it("puts runs of different lengths on one axis", () => {
    const { x, values } = align([
      { iterations: [0, 1, 2], values: [0.1, 0.2, 0.3] },
      { iterations: [1, 3], values: [0.5, null] },
    ]);
    expect(x).toEqual([0, 1, 2, 3]);
    expect(values).toEqual([[0.1, 0.2, 0.3, null], [null, 0.5, null, null]]);
  });

  it("lists only the settings that differ", () => {
    const diff = configDiff([{ algo: "gigpo", seed: 0, lr: 1e-3 }, { algo: "grpo", seed: 0, lr: 1e-3, kl: { coef: 0.1 } }]);
    expect(diff).toEqual([
      { key: "algo", values: ["gigpo", "grpo"] },
      { key: "kl", values: ["—", '{"coef":0.1}'] },
    ]);
    expect(configDiff([{ a: 1 }, { a: 1 }])).toEqual([]);
  });

  it("reads the overlaid runs from the address", () => {
    expect(overlayFromQuery(new URLSearchParams("overlay=a,%20b,,c"))).toEqual(["a", "b", "c"]);
    expect(overlayFromQuery(new URLSearchParams(""))).toEqual([]);
  });
});
