/* Generated from protocol/schema/receipt.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `receipt --json`: whether the receipt verifies against its registration.
 */
export interface ReceiptVerdictDoc {
  id: string;
  path: string;
  reason?: string | null;
  receipt?: ReceiptDoc | null;
  state?: ("live" | "exited" | "unverified" | "corrupt") | null;
  verified: boolean;
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
