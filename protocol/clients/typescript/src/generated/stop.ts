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
  reason?:
    | (
        | UnverifiedScopeReason
        | EarlierBootScopeReason
        | NotTheProofFilesReceiptScopeReason
        | UnboundScopeReason
        | StopFailedScopeReason
        | ErrorScopeReason
      )
    | null;
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
/**
 * `unverified`: the check that `failed`.
 */
export interface UnverifiedScopeReason {
  /**
   * Why a scope is `unverified`: the check that failed (`check`), with its fields.
   */
  failed:
    | ProofMissingUnverifiedReason
    | ProofUnreadableUnverifiedReason
    | ProofReplacedUnverifiedReason
    | ReceiptCorruptUnverifiedReason
    | FieldMismatchUnverifiedReason
    | GuardianGoneWithoutReceiptUnverifiedReason
    | BootIdMissingUnverifiedReason
    | CurrentBootUnknownUnverifiedReason
    | MixedBootIdsUnverifiedReason;
  kind: "unverified";
  [k: string]: unknown;
}
/**
 * No file at the registered proof path.
 */
export interface ProofMissingUnverifiedReason {
  check: "proof_missing";
  [k: string]: unknown;
}
/**
 * The proof file could not be read (errno).
 */
export interface ProofUnreadableUnverifiedReason {
  check: "proof_unreadable";
  errno?: number | null;
  [k: string]: unknown;
}
/**
 * The file at the proof path is not the registered inode (replaced or copied).
 */
export interface ProofReplacedUnverifiedReason {
  check: "proof_replaced";
  found: ProofInode;
  registered: ProofInode;
  [k: string]: unknown;
}
/**
 * A proof file's `(st_dev, st_ino)`.
 */
export interface ProofInode {
  dev: number;
  ino: number;
  [k: string]: unknown;
}
/**
 * The proof file holds bytes that are not a valid receipt (the decoder's words).
 */
export interface ReceiptCorruptUnverifiedReason {
  check: "receipt_corrupt";
  error: string;
  [k: string]: unknown;
}
/**
 * A valid receipt, but a bound field differs from the registration.
 */
export interface FieldMismatchUnverifiedReason {
  check: "field_mismatch";
  /**
   * A receipt field bound to the registration.
   */
  field: "registration" | "runtime" | "boot_id" | "guardian" | "workload" | "proof";
  [k: string]: unknown;
}
/**
 * Same boot, the guardian is gone, and no receipt was written.
 */
export interface GuardianGoneWithoutReceiptUnverifiedReason {
  check: "guardian_gone_without_receipt";
  [k: string]: unknown;
}
/**
 * The registration carries no boot id (all zero).
 */
export interface BootIdMissingUnverifiedReason {
  check: "boot_id_missing";
  [k: string]: unknown;
}
/**
 * The current boot id cannot be read.
 */
export interface CurrentBootUnknownUnverifiedReason {
  check: "current_boot_unknown";
  [k: string]: unknown;
}
/**
 * Earlier-boot evidence whose boot ids disagree (registration vs receipt).
 */
export interface MixedBootIdsUnverifiedReason {
  check: "mixed_boot_ids";
  other: string;
  registration: string;
  [k: string]: unknown;
}
/**
 * `exited` without a receipt: its boot has ended, which ended every process of it.
 */
export interface EarlierBootScopeReason {
  boot_id: string;
  kind: "earlier_boot";
  [k: string]: unknown;
}
/**
 * `receipt`: a valid receipt, but not the one the registration's proof file holds.
 */
export interface NotTheProofFilesReceiptScopeReason {
  kind: "not_the_proof_files_receipt";
  [k: string]: unknown;
}
/**
 * `receipt`: the checksum is valid, but no registration of the port to bind it to.
 */
export interface UnboundScopeReason {
  kind: "unbound";
  port: number;
  registration: string;
  [k: string]: unknown;
}
/**
 * The stop of the scope's residue failed (its launch result says why).
 */
export interface StopFailedScopeReason {
  error: string;
  kind: "stop_failed";
  [k: string]: unknown;
}
/**
 * Its record cannot be read, or its stop failed: the error, in words.
 */
export interface ErrorScopeReason {
  error: string;
  kind: "error";
  [k: string]: unknown;
}
