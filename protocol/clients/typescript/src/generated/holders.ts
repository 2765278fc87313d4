/* Generated from protocol/schema/holders.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `holders --json`: what holds one path.
 */
export interface HoldersDoc {
  elapsed_ms: number;
  exists: boolean;
  holders: HolderDoc[];
  path: string;
  /**
   * Processes looked at.
   */
  scanned: number;
  /**
   * Processes whose files could not be read (permission): they may hold the path too.
   */
  unreadable: number;
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
