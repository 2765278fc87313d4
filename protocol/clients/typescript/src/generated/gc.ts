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
   * Why (for kept) or the assessment (for deleted).
   */
  reason: string;
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
  reason: string;
  /**
   * For a registration forgotten (or that would be): how long nothing of it changed.
   */
  unchanged_secs?: number | null;
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
