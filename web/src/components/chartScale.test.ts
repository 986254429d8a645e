import { describe, expect, it } from "vitest";
import { barRange } from "./chartScale";

describe("bar range", () => {
  it("starts at 0 for positive bars, at least up to 1", () => {
    expect(barRange(2, 7)).toEqual([0, 7]);
    expect(barRange(0.2, 0.6)).toEqual([0, 1]);
    expect(barRange(0, 0)).toEqual([0, 1]);
    expect(barRange(null, null)).toEqual([0, 1]);
  });

  it("reaches below 0 for negative bars, so they grow down from the zero line", () => {
    expect(barRange(-2, 3)).toEqual([-2, 3]);
    expect(barRange(-0.5, 0.25)).toEqual([-0.5, 0.25]);
  });

  it("ends at 0 when every bar is negative", () => {
    expect(barRange(-5, -1)).toEqual([-5, 0]);
  });
});
