/* Generated from protocol/schema/gc.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `gc --json`.
 */
export interface GcDoc {
  deleted_bytes: number;
  deleted_files: number;
  dry_run: boolean;
  entries: RetentionEntryDoc[];
  forget: ForgetDoc;
  older_than_secs: number;
  /**
   * Records without an open-index marker that the assessment does not call `exited`, put
   * back into the index.
   */
  reindexed: string[];
  /**
   * Files no record covers (D5): removed, would be removed, or kept and why.
   */
  strays: StrayDoc[];
  [k: string]: unknown;
}
export interface RetentionEntryDoc {
  /**
   * What retention did with a registration's artifacts (`gc`).
   *
   * `empty`: Nothing to do: no artifacts left.
   */
  action: "deleted" | "would_delete" | "kept" | "empty";
  /**
   * How old the evidence is, when it was measured.
   */
  age_secs?: number | null;
  bytes: number;
  files: string[];
  id: string;
  /**
   * Why it was kept, or deleted.
   */
  reason:
    | NoArtifactsRetentionReason
    | MissingRecordRetentionReason
    | YoungRetentionReason
    | NotExitedRetentionReason
    | LockBusyRetentionReason
    | RecordNotIntactRetentionReason
    | StatFailedRetentionReason
    | ExitedYoungRetentionReason
    | ExitedPastLimitRetentionReason
    | RemoveFailedRetentionReason
    | SyncFailedRetentionReason;
  [k: string]: unknown;
}
/**
 * `empty`: the registration has no artifact files.
 */
export interface NoArtifactsRetentionReason {
  kind: "no_artifacts";
  [k: string]: unknown;
}
/**
 * Artifacts without a record: nothing proves their scope exited.
 */
export interface MissingRecordRetentionReason {
  kind: "missing_record";
  [k: string]: unknown;
}
/**
 * An artifact was written within the limit (its `age_secs` beside the reason).
 */
export interface YoungRetentionReason {
  kind: "young";
  [k: string]: unknown;
}
/**
 * The scope is not proven exited: the assessment's state and reason.
 */
export interface NotExitedRetentionReason {
  kind: "not_exited";
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
 * The registration's lock is busy (its owner holds it) or cannot be taken.
 */
export interface LockBusyRetentionReason {
  error: string;
  kind: "lock_busy";
  [k: string]: unknown;
}
/**
 * The record does not decode intact.
 */
export interface RecordNotIntactRetentionReason {
  error: string;
  kind: "record_not_intact";
  [k: string]: unknown;
}
/**
 * An artifact's age cannot be read.
 */
export interface StatFailedRetentionReason {
  error: string;
  kind: "stat_failed";
  path: string;
  [k: string]: unknown;
}
/**
 * Exited, but the receipt or an artifact is younger than the limit.
 */
export interface ExitedYoungRetentionReason {
  kind: "exited_young";
  [k: string]: unknown;
}
/**
 * Exited (verified) and past the limit: deleted, or would be.
 */
export interface ExitedPastLimitRetentionReason {
  kind: "exited_past_limit";
  [k: string]: unknown;
}
/**
 * Deleted, but removing this artifact failed (the others are gone).
 */
export interface RemoveFailedRetentionReason {
  error: string;
  kind: "remove_failed";
  path: string;
  [k: string]: unknown;
}
/**
 * Deleted, but syncing the logs directory failed afterwards.
 */
export interface SyncFailedRetentionReason {
  error: string;
  kind: "sync_failed";
  [k: string]: unknown;
}
/**
 * Forgetting whole exited registrations.
 */
export interface ForgetDoc {
  dry_run: boolean;
  /**
   * Registrations past the horizon by their files' age: forgotten, or kept and why.
   */
  entries: ForgetEntryDoc[];
  forget_after_secs: number;
  /**
   * Registrations removed by this pass.
   */
  forgotten: number;
  /**
   * Removals an earlier, interrupted pass had started and this one finished.
   */
  resumed: number;
  /**
   * Registrations younger than the horizon (not listed in `entries`).
   */
  young: number;
  [k: string]: unknown;
}
export interface ForgetEntryDoc {
  /**
   * What forgetting did with a whole registration (`gc`).
   *
   * `kept`: Past the horizon by its files' age, but not forgotten (the reason says why).
   */
  action: "forgotten" | "would_forget" | "kept";
  id: string;
  /**
   * Why it was kept, or forgotten.
   */
  reason:
    | NotExitedForgetReason
    | LockBusyForgetReason
    | RecordNotIntactForgetReason
    | ExitedPastHorizonForgetReason
    | MarkerNotRemovedForgetReason
    | RecordNotMovedForgetReason
    | RemoveFailedForgetReason;
  /**
   * For a registration forgotten (or that would be): how long nothing of it changed.
   */
  unchanged_secs?: number | null;
  [k: string]: unknown;
}
/**
 * Only exited registrations are forgotten: the assessment's state and reason.
 */
export interface NotExitedForgetReason {
  kind: "not_exited";
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
}
/**
 * The registration's lock is busy (its owner holds it) or cannot be taken.
 */
export interface LockBusyForgetReason {
  error: string;
  kind: "lock_busy";
  [k: string]: unknown;
}
/**
 * The record does not decode intact.
 */
export interface RecordNotIntactForgetReason {
  error: string;
  kind: "record_not_intact";
  [k: string]: unknown;
}
/**
 * Exited and nothing of it changed within the horizon (`unchanged_secs` beside it):
 * forgotten, or would be.
 */
export interface ExitedPastHorizonForgetReason {
  kind: "exited_past_horizon";
  [k: string]: unknown;
}
/**
 * Its open-index marker could not be removed.
 */
export interface MarkerNotRemovedForgetReason {
  error: string;
  kind: "marker_not_removed";
  [k: string]: unknown;
}
/**
 * Its record could not be moved aside (the forget intent).
 */
export interface RecordNotMovedForgetReason {
  error: string;
  kind: "record_not_moved";
  [k: string]: unknown;
}
/**
 * A file of it could not be removed: the intent stays and the next pass tries again.
 */
export interface RemoveFailedForgetReason {
  error: string;
  kind: "remove_failed";
  path: string;
  [k: string]: unknown;
}
/**
 * A file no record covers.
 */
export interface StrayDoc {
  /**
   * What `gc` did with a file no record covers (SPEC D5).
   */
  action: "removed" | "would_remove" | "kept";
  bytes: number;
  /**
   * The registration the file is named for, when its name says.
   */
  id?: string | null;
  path: string;
  /**
   * Why a file is (or would be) collected, or kept.
   */
  reason:
    | NoRecordStrayReasonDoc
    | TemporaryStrayReasonDoc
    | YoungStrayReasonDoc
    | LockedStrayReasonDoc
    | FailedStrayReasonDoc
    | EndedScopeCgroupStrayReasonDoc
    | UnnamedCgroupStrayReasonDoc;
  [k: string]: unknown;
}
/**
 * No record names its id.
 */
export interface NoRecordStrayReasonDoc {
  kind: "no_record";
  [k: string]: unknown;
}
/**
 * A temporary file of a replacement that never finished.
 */
export interface TemporaryStrayReasonDoc {
  kind: "temporary";
  [k: string]: unknown;
}
/**
 * Younger than the safety age: a launch or a replacement may still be writing it.
 */
export interface YoungStrayReasonDoc {
  age_secs: number;
  kind: "young";
  limit_secs: number;
  [k: string]: unknown;
}
/**
 * The id's registration lock is held: something still uses it.
 */
export interface LockedStrayReasonDoc {
  kind: "locked";
  [k: string]: unknown;
}
/**
 * The removal failed (the error, as text).
 */
export interface FailedStrayReasonDoc {
  error: string;
  kind: "failed";
  [k: string]: unknown;
}
/**
 * The cgroup directory of a scope that ended (F4), left by a launcher that died between
 * the receipt and its removal.
 */
export interface EndedScopeCgroupStrayReasonDoc {
  kind: "ended_scope_cgroup";
  [k: string]: unknown;
}
/**
 * A cgroup directory below the runtime's parent that no record names (its launcher died
 * between the `mkdir` and the record).
 */
export interface UnnamedCgroupStrayReasonDoc {
  kind: "unnamed_cgroup";
  [k: string]: unknown;
}
