/* Generated from protocol/schema/reap.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * A holder still there, and why. (A `not_orphan` entry repeats `ppid`: the holder's, then the
 * reason's, the same number.)
 */
export type LeftDoc = {
  /**
   * Time since the process started, milliseconds.
   */
  age_ms: number;
  /**
   * User + system CPU time, milliseconds.
   */
  cpu_ms: number;
  orphaned?: (InitAdopterDoc | SubreaperAdopterDoc | EndedGuardianAdopterDoc) | null;
  owner?: OwnerDoc | null;
  /**
   * The first reported path under the target (lossy UTF-8, as the kernel shows it).
   */
  path: string;
  pid: number;
  ppid: number;
  /**
   * The file name of `/proc/PID/exe`; `[comm]` for a kernel thread.
   */
  program: string;
  start_time: number;
  /**
   * How it holds the path: the first of cwd, root, an open file, a mapped file that does.
   */
  via: "cwd" | "root" | "open_file" | "mapped_file";
  [k: string]: unknown;
} & (
  | LiveWorkloadLeftDoc
  | ResidueSurvivedLeftDoc
  | NotOrphanLeftDoc
  | GuardianLeftDoc
  | GuardianBelowLeftDoc
  | SurvivedLeftDoc
);

/**
 * `reap --checkout --json`.
 */
export interface ReapDoc {
  /**
   * A kill of the orphans that failed (the holders it did not end are in `left`).
   */
  error?: string | null;
  exists: boolean;
  /**
   * Orphans (and their descendants) killed.
   */
  killed: WitnessDoc[];
  /**
   * Whatever still holds the path afterwards.
   */
  left: LeftDoc[];
  path: string;
  /**
   * Holders whose live workload works there: when not empty, nothing was signalled.
   */
  refused: HolderDoc[];
  /**
   * Residue scopes stopped through the one stop.
   */
  stopped: ScopeStopDoc[];
  [k: string]: unknown;
}
/**
 * A process witness: `{pid, start_time}`.
 */
export interface WitnessDoc {
  pid: number;
  start_time: number;
  [k: string]: unknown;
}
/**
 * Parent pid 1.
 */
export interface InitAdopterDoc {
  adopter: "init";
  [k: string]: unknown;
}
/**
 * The parent is a known subreaper outside any scope.
 */
export interface SubreaperAdopterDoc {
  adopter: "subreaper";
  pid: number;
  program: string;
  [k: string]: unknown;
}
/**
 * The parent is the guardian of a registration that is no longer live.
 */
export interface EndedGuardianAdopterDoc {
  adopter: "ended_guardian";
  id: string;
  [k: string]: unknown;
}
/**
 * The registration a holder belongs to.
 */
export interface OwnerDoc {
  /**
   * How a holder's owning registration was found.
   *
   * `guardian`: The registration's guardian is an ancestor (or the process itself).
   * `marker`: `REFINE_OWNER=<id>` in its environment.
   */
  found: "guardian" | "marker";
  id: string;
  /**
   * The port whose `run/P` holds the record (`null` when unknown).
   */
  port?: number | null;
  /**
   * The owning registration's state: the assessment's answer, or `unknown` for a marker that
   * names no registration under this home.
   */
  state: "live" | "exited" | "unverified" | "unknown";
  /**
   * Whether the registration's workload process itself is still running.
   */
  workload_alive: boolean;
  [k: string]: unknown;
}
/**
 * Its registration is live and its workload runs (the reap refused).
 */
export interface LiveWorkloadLeftDoc {
  reason: "live_workload";
  [k: string]: unknown;
}
/**
 * Residue of a registration whose stop did not end it.
 */
export interface ResidueSurvivedLeftDoc {
  reason: "residue_survived";
  [k: string]: unknown;
}
/**
 * No live owner, but its parent is alive and did not adopt it: not an orphan.
 */
export interface NotOrphanLeftDoc {
  parent: string;
  ppid: number;
  reason: "not_orphan";
  [k: string]: unknown;
}
/**
 * The guardian of a registration (of any home): left to that registration.
 */
export interface GuardianLeftDoc {
  guardian_of: GuardianOfDoc;
  reason: "guardian";
  [k: string]: unknown;
}
/**
 * The registration a guardian process belongs to, in any home.
 */
export interface GuardianOfDoc {
  home: string;
  id: string;
  port: number;
  [k: string]: unknown;
}
/**
 * An orphan whose tree holds a registration's guardian: left to that registration.
 */
export interface GuardianBelowLeftDoc {
  guardian_of: GuardianOfDoc;
  reason: "guardian_below";
  [k: string]: unknown;
}
/**
 * Signalled, but still alive when the budget ran out.
 */
export interface SurvivedLeftDoc {
  reason: "survived";
  [k: string]: unknown;
}
/**
 * One process that holds the path.
 */
export interface HolderDoc {
  /**
   * Time since the process started, milliseconds.
   */
  age_ms: number;
  /**
   * User + system CPU time, milliseconds.
   */
  cpu_ms: number;
  orphaned?: (InitAdopterDoc | SubreaperAdopterDoc | EndedGuardianAdopterDoc) | null;
  owner?: OwnerDoc | null;
  /**
   * The first reported path under the target (lossy UTF-8, as the kernel shows it).
   */
  path: string;
  pid: number;
  ppid: number;
  /**
   * The file name of `/proc/PID/exe`; `[comm]` for a kernel thread.
   */
  program: string;
  start_time: number;
  /**
   * How it holds the path: the first of cwd, root, an open file, a mapped file that does.
   */
  via: "cwd" | "root" | "open_file" | "mapped_file";
  [k: string]: unknown;
}
/**
 * How a residue scope's stop ended.
 */
export interface ScopeStopDoc {
  error?: string | null;
  id: string;
  /**
   * The stop's outcome, or `null` when it failed (see `error`).
   */
  outcome?: ("already_exited" | "stopped" | "killed_unverified" | "not_signalled") | null;
  port: number;
  /**
   * Whether the scope's receipt verifies after the stop.
   */
  receipt_verified: boolean;
  [k: string]: unknown;
}
