import { describe, expect, it } from "vitest";
import { ApiError } from "./api/client";
import { elapsedText, sqlFailure, SQL_TABLES } from "./sqlConsole";

describe("the SQL console", () => {
  it("says a failure once, without the type and the server's prefix", () => {
    const e = new ApiError(400, "SqlRefused: query failed: Binder Error: column x not found", "SqlRefused");
    expect(sqlFailure(e)).toBe("Binder Error: column x not found");
    expect(sqlFailure(new ApiError(0, "the server did not answer (TypeError)"))).toBe("the server did not answer (TypeError)");
  });

  it("offers the tables people asked for", () => {
    expect(SQL_TABLES).toContain("jobs");
    expect(SQL_TABLES).toContain("saved_views");
  });

  it("shows a running time", () => {
    expect(elapsedText(1234)).toBe("1.2 s");
    expect(elapsedText(75_000)).toBe("1 min 15 s");
  });
});
