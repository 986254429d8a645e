import { describe, expect, it } from "vitest";
import { bound, lastN } from "./overSeeds";

describe("the over-seeds view", () => {
  it("cuts a rate's interval to 0-100%, as the table does", () => {
    expect(bound(-0.31, true)).toBe(0);
    expect(bound(1.2, true)).toBe(1);
    expect(bound(-0.31, false)).toBe(-0.31);
    expect(bound(null, true)).toBeNull();
  });

  it("says how many iterations the final mean covers", () => {
    expect(lastN([{ iterations: [0, 1, 2, 3] }, { iterations: [0, 1] }])).toBe("last 4 iterations");
    expect(lastN([{ iterations: Array.from({ length: 40 }, (_, i) => i) }])).toBe("last 5 iterations");
    expect(lastN([{ iterations: [0] }])).toBe("last iteration");
  });
});
