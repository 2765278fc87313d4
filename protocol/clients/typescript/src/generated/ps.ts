/* Generated from protocol/schema/ps.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `ps --json`.
 */
export interface PsDoc {
  port: number;
  /**
   * The rows, as the socket API's `list` reply carries them.
   */
  registrations: ScopeView[];
  [k: string]: unknown;
}
/**
 * One registration as `ps` shows it (human table and `--json`).
 */
export interface ScopeView {
  age_secs: number;
  argv: string[];
  cwd: string;
  exit_code?: number | null;
  guardian_pid: number;
  /**
   * H7: where a launch with a health check stands (`starting`, `healthy`, `unhealthy`);
   * absent for one without.
   */
  health?: ("starting" | "healthy" | "unhealthy") | null;
  id: string;
  /**
   * The launch's kind, or `?` for a record that does not decode.
   */
  kind: ("agent" | "quality" | "command" | "terminal") | "?";
  label: string;
  /**
   * The launch's outcome (`completed`, `stopped`, `timed_out`, ...) once its engine returned
   * the result; `null` before that or when no engine did.
   */
  outcome?:
    | (
        | "completed"
        | "timed_out"
        | "idle_timeout"
        | "cancelled"
        | "output_limit"
        | "spawn_failed"
        | "capture_fault"
        | "stopped"
        | "guardian_lost"
        | "stop_failed"
      )
    | null;
  pid: number;
  /**
   * H6: where a launch with readiness stands (`starting`, `ready`, `failed`); absent for
   * one without.
   */
  ready?: ("starting" | "ready" | "failed") | null;
  /**
   * Why the scope is `unverified` (or `corrupt`); `null` otherwise.
   */
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
  signal?: number | null;
  /**
   * An open `silent` incident; `null` when none.
   */
  silent?: StallIncident | null;
  /**
   * The service's stall watch (H3): an open `stalled` incident of this live scope, with
   * its figures; `null` when none (or no service watches).
   */
  stalled?: StallIncident | null;
  started_at_unix_ms: number;
  /**
   * `live`, `exited`, `unverified`, or `corrupt` (a record that does not decode).
   */
  state: "live" | "exited" | "unverified" | "corrupt";
  /**
   * The workload's own status: `exited`, `signaled`, `never_started`, `unknown`. From the
   * receipt; while a descendant still holds the scope, as the launching engine reported it;
   * `null` while neither knows.
   */
  status?: ("exited" | "signaled" | "never_started" | "unknown") | null;
  stderr: string;
  stdout: string;
  /**
   * What the whole tree cost (H4), from a version-2 receipt; `null` before the receipt.
   */
  usage?: UsageDoc | null;
  /**
   * Whether the workload's own process runs now: its witness (pid and start time) names a
   * process that is not a zombie. `false` once it ended, also while `status` is `null` (a live
   * scope held by what it left, whose launcher died before it could report the status), and
   * for a scope that is not `live`; `null` from a writer that did not say (an older service).
   */
  workload_running?: boolean | null;
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
/**
 * An open stall watch incident and its figures.
 */
export interface StallIncident {
  /**
   * The tree's average CPU over the last N samples, in thousandths of one core.
   */
  cpu_permille: number;
  /**
   * The last sample at which an artifact changed (or the watch's first sample).
   */
  last_write_unix_ms: number;
  /**
   * Busy samples in a row (stalled) or samples without a write (silent).
   */
  samples: number;
  /**
   * A stall watch signal (SPEC H3).
   *
   * `stalled`: The tree burned CPU for N samples in a row while none of its artifacts grew.
   * `silent`: Nothing was written for M samples while the scope was alive.
   */
  signal: "stalled" | "silent";
  /**
   * When the incident began (wall clock of the sample that raised it).
   */
  since_unix_ms: number;
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
