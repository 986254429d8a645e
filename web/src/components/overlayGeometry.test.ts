import { describe, expect, it } from "vitest";
import { arrowHead, markerUnit, roundHalfEven, strokeWidth, toPixels } from "./overlayGeometry";

describe("marker sizes", () => {
  it("is 1/54 of the shorter side, never under 8 px", () => {
    expect(markerUnit(1080, 2400)).toBe(20);
    expect(markerUnit(2400, 1080)).toBe(20);
    expect(markerUnit(200, 300)).toBe(8);
  });

  it("rounds a stroke as the server's Python does", () => {
    expect(roundHalfEven(2.5)).toBe(2);
    expect(roundHalfEven(3.5)).toBe(4);
    expect(roundHalfEven(2.4)).toBe(2);
    expect(roundHalfEven(2.6)).toBe(3);
    // a 675 px wide screen: unit 12.5, a fifth 2.5 -> 2 (Math.round would draw 3)
    expect(strokeWidth(markerUnit(675, 1500))).toBe(2);
    expect(strokeWidth(markerUnit(1080, 2400))).toBe(4);
    expect(strokeWidth(8)).toBe(2);
  });
});

describe("marker points", () => {
  it("scales fractions of the screen to the image's pixels", () => {
    expect(toPixels([{ x: 0.5, y: 0.25 }, { x: 1, y: 0 }], 1080, 2400)).toEqual([[540, 600], [1080, 0]]);
  });

  it("puts a swipe's arrow head behind its end, symmetric about the swipe", () => {
    const [p1, p2] = arrowHead([100, 500], [100, 100], 20); // straight up
    expect(p1[1]).toBeGreaterThan(100);
    expect(p2[1]).toBeGreaterThan(100);
    expect(p1[1]).toBeCloseTo(p2[1]);
    expect(p1[0] - 100).toBeCloseTo(100 - p2[0]);
    const length = Math.hypot(p1[0] - 100, p1[1] - 100);
    expect(length).toBeCloseTo(24); // 1.2 units
  });
});
