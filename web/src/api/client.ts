// The only way the app talks to the server: openapi-fetch typed by schema.d.ts, which
// `just web-client` generates from the API's OpenAPI document. Every call goes through
// `call`, which turns the API's one error shape into an ApiError with its message.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema";

export type Schemas = components["schemas"];
export type Episode = Schemas["Episode"];
export type Step = Schemas["Step"];
export type EpisodeDetail = Schemas["EpisodeDetail"];
export type TaskNode = Schemas["TaskNode"];
export type SetRow = Schemas["Set"];
export type Member = Schemas["Member"];
export type EpisodeFilter = Schemas["EpisodeFilter"];
export type Membership = Schemas["Membership"];
export type Annotation = Schemas["Annotation"];
export type Stats = Schemas["Stats"];
export type SqlResult = Schemas["SqlResult"];
export type GroupDetail = Schemas["GroupDetail"];
export type GroupSummary = Schemas["GroupSummary"];
export type ErrorDetail = Schemas["ErrorDetail"];
export type JobProgress = Schemas["JobProgress"];
export type ExportCreate = Schemas["ExportCreate"];
export type ExportSummary = Schemas["ExportSummary"];
export type RerunCreate = Schemas["RerunCreate"];
export type RerunSummary = Schemas["RerunSummary"];
export type RerunDetail = Schemas["RerunDetail"];
export type BranchCreate = Schemas["BranchCreate"];
export type BranchJob = Schemas["BranchJob"];
export type EpisodeBranches = Schemas["EpisodeBranches"];
export type RunSummary = Schemas["RunSummary"];
export type RunDetail = Schemas["RunDetail"];
export type RunArm = Schemas["RunArm"];
export type SearchHit = Schemas["SearchHit"];
export type SavedView = Schemas["SavedView"];
export type SavedQuery = Schemas["SavedQuery"];
export type UserOut = Schemas["UserOut"];
export type AuditEntry = Schemas["AuditEntry"];
export type OcrBox = Schemas["OcrBox"];
export type EpisodeQuery = NonNullable<paths["/api/episodes"]["get"]["parameters"]["query"]>;
export type SearchQuery = paths["/api/search"]["get"]["parameters"]["query"];
export type FailureCategory = NonNullable<Schemas["MemberPut"]["failure_category"]>;

export const FAILURE_CATEGORIES: FailureCategory[] = [
  "grounding",
  "planning",
  "perception",
  "environment",
  "other",
];

export const api = createClient<paths>({ baseUrl: "", credentials: "same-origin" });

export class ApiError extends Error {
  constructor(
    public status: number,
    message: string,
    /** The API's error type (`InvalidInput`, `EmptySelection`, ...); none when the server did not answer. */
    public type?: string,
  ) {
    super(message);
  }
}

type Result<T> = { data?: T; error?: unknown; response: Response };

/** The response body of a call, or an ApiError naming what went wrong. */
export async function call<T>(request: Promise<Result<T>>): Promise<T> {
  let result: Result<T>;
  try {
    result = await request;
  } catch (e) {
    throw new ApiError(0, `the server did not answer (${String(e)})`);
  }
  if (!result.response.ok) {
    const body = result.error as { error?: { type?: string; message?: string } } | undefined;
    const err = body?.error;
    throw new ApiError(result.response.status, err ? errorText(result.response.status, err.type, err.message ?? "") : `HTTP ${result.response.status}`, err?.type);
  }
  return result.data as T;
}

/** How an error reads in the app. Refusals are said in plain words: who you are, what your
 * role lacks and who can change it, rather than the API's "Forbidden: ... POST /api/...";
 * a stale version's message is plain already; the rest keep their type in front. */
export function errorText(status: number, type: string | undefined, message: string): string {
  if (status === 401) return "You are not signed in any more (or your token was replaced): reload the page to sign in again.";
  if (status === 403 && type === "Forbidden") {
    const role = /^(.+?) is an? (\w+): .* needs the (\w+) role/.exec(message);
    return role
      ? `Not allowed: you are signed in as ${role[1]}, a ${role[2]}, and this needs the ${role[3]} role. An admin can change your role.`
      : `Not allowed: ${message.replace(/ ?(GET|POST|PUT|PATCH|DELETE) \/api\/\S*/g, "")}`;
  }
  if (status === 403 || status === 412) return message;
  return `${type}: ${message}`;
}

/** The header that makes a change of a set, a saved view or a saved query safe: the version
 * it was made from (every such change the app sends carries it; the server refuses a stale one). */
export function ifMatch(version: number): { "If-Match": string } {
  return { "If-Match": `"${version}"` };
}

/** Whether `e` is the server's refusal of a change made from an older version (412). */
export function isStale(e: unknown): boolean {
  return e instanceof ApiError && e.status === 412;
}

/** A step image URL, scaled down for thumbnails when `maxSide` is given. */
export function imageSrc(url: string | null | undefined, maxSide?: number): string | undefined {
  if (!url) return undefined;
  return maxSide ? `${url}?max_side=${maxSide}` : url;
}
