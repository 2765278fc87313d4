/* Generated from protocol/schema/stop.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `stop --json` (and the socket API's `stop` reply). `state` is `exited` only when a verified
 * receipt proves it. A stop that failed has `outcome: "failed"` and `error` instead of the
 * figures.
 */
export type StopDoc = (StopDocFields | ErrorStopDoc) & {
  id: string;
  /**
   * The stop's own outcome, or `failed`.
   */
  outcome: ("already_exited" | "stopped" | "killed_unverified" | "not_signalled") | "failed";
  reason?: string | null;
  /**
   * What the evidence says about a registration's scope (SPEC A1), as every document shows
   * it.
   *
   * `live`: The guardian is alive: the scope may still hold processes.
   * `exited`: A verified receipt (or an ended boot) proves every process of the scope ended.
   * `unverified`: Neither proven alive nor proven ended.
   * `corrupt`: The registration record does not decode: shown, never guessed at.
   */
  state: "live" | "exited" | "unverified" | "corrupt";
  [k: string]: unknown;
};

export interface StopDocFields {
  killed: number;
  receipt?: ReceiptDoc | null;
  signalled: number;
  timings_us: StopTimingsDoc;
  [k: string]: unknown;
}
/**
 * A decoded receipt (`show`, `stop`, `receipt`).
 */
export interface ReceiptDoc {
  boot_id: string;
  /**
   * `completed`, `aborted`, `spawnfailed`, or `guardian_error N: why`.
   */
  end: string;
  exit_code?: number | null;
  guardian: WitnessDoc;
  proof: ProofDoc;
  reaped: number;
  registration: string;
  runtime: string;
  signal?: number | null;
  spawn_errno: number;
  status?: ("exited" | "signaled" | "never_started" | "unknown") | null;
  /**
   * The whole tree's CPU time and largest peak RSS (H4); `null` in a version-1 receipt.
   */
  usage?: UsageDoc | null;
  workload: WitnessDoc;
  workload_exited_at_ns: number;
  written_at_ns: number;
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
 * A proof file's identity, with its path where the record names it.
 */
export interface ProofDoc {
  dev: number;
  ino: number;
  path?: string | null;
  [k: string]: unknown;
}
/**
 * What the whole tree cost (SPEC H4), from a version-2 receipt.
 */
export interface UsageDoc {
  /**
   * The largest peak resident set of any one process of the tree, KiB.
   */
  max_rss_kib: number;
  system_us: number;
  user_us: number;
  [k: string]: unknown;
}
/**
 * The stop's phases, in whole microseconds.
 */
export interface StopTimingsDoc {
  fence_wait: number;
  /**
   * The grace phase (polite signal and wait, outside the fence); 0 without `--grace`.
   */
  grace: number;
  kill_to_exit: number;
  quiesce: number;
  total: number;
  [k: string]: unknown;
}
export interface ErrorStopDoc {
  error: string;
  [k: string]: unknown;
}
