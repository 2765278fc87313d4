/* Generated from protocol/schema/recover.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `recover --json`: a `summary` of actions (absent when nothing ran on the port) and, per
 * registration, its `id`, the `action` taken, and the `state` and `reason` afterwards.
 */
export interface RecoverDoc {
  /**
   * `recover --dry-run`: the actions are what recovery would do; nothing was done.
   */
  dry_run?: boolean;
  /**
   * The registrations of the open index (recovery reads no others: those are proven exited).
   */
  registrations: RecoverEntryDoc[];
  summary?: {
    [k: string]: number;
  } | null;
  /**
   * Open-index markers whose launch died before it wrote its record, dropped.
   */
  unwritten_dropped?: number;
  [k: string]: unknown;
}
export interface RecoverEntryDoc {
  /**
   * What recovery did (or, `--dry-run`, would do) with one registration.
   *
   * `adopted`: Live and stale, kept on its launcher's loss (L6): left running, identity checked.
   * `would_stop`: `--dry-run`: live and stale, recovery would stop it.
   * `would_adopt`: `--dry-run`: live and stale, kept on its launcher's loss: recovery would adopt it.
   * `would_release`: `--dry-run`: exited, recovery would release it.
   * `would_keep`: `--dry-run`: unverified, recovery would keep it.
   */
  action:
    | "stopped"
    | "released"
    | "kept"
    | "stop_failed"
    | "owned"
    | "corrupt"
    | "adopted"
    | "would_stop"
    | "would_adopt"
    | "would_release"
    | "would_keep";
  id: string;
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
