/* Generated from protocol/schema/run.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `run --json`: the launch's result as its engine returned it.
 */
export interface RunDoc {
  capture_receipt?: string | null;
  errno?: number | null;
  exit_code?: number | null;
  id: string;
  /**
   * How a launch ended (SPEC S7): what its engine returned, or (`stop_failed`) that the stop
   * of the scope's residue failed afterwards.
   *
   * `completed`: The workload ran and exited on its own (any status).
   * `timed_out`: The completion deadline passed; the tree was stopped.
   * `idle_timeout`: The idle deadline passed; the tree was stopped.
   * `cancelled`: The caller cancelled; the tree was stopped.
   * `output_limit`: The output budget was exceeded; the tree was stopped.
   * `spawn_failed`: A step of the release failed; the workload never ran.
   * `capture_fault`: Capture failed; the tree was stopped.
   * `stopped`: An operator stopped it.
   * `guardian_lost`: The guardian reported a fatal error or vanished.
   * `stop_failed`: The stop of the scope's residue failed (only a launch result record says this; an
   * engine never returns it).
   */
  outcome:
    | "completed"
    | "timed_out"
    | "idle_timeout"
    | "cancelled"
    | "output_limit"
    | "spawn_failed"
    | "capture_fault"
    | "stopped"
    | "guardian_lost"
    | "stop_failed";
  /**
   * The scope when a launch's engine returned (`run --json` `scope`).
   *
   * `exited`: The guardian's receipt arrived: nothing of the tree is left.
   * `live`: A descendant holds the scope and the policy keeps it.
   * `stopping`: A descendant holds the scope and the shared stop ends it.
   * `unknown`: The guardian is gone without a receipt.
   */
  scope: "exited" | "live" | "stopping" | "unknown";
  signal?: number | null;
  status?: ("exited" | "signaled" | "never_started" | "unknown") | null;
  stderr: StreamDoc;
  stdout: StreamDoc;
  stop_failure?: string | null;
  [k: string]: unknown;
}
/**
 * One captured stream of a `run`.
 */
export interface StreamDoc {
  bytes: number;
  complete: boolean;
  /**
   * How the stream ended, tagged by `kind`.
   */
  end: EofStreamEndDoc | NotCapturedStreamEndDoc | IncompleteStreamEndDoc;
  path?: string | null;
  [k: string]: unknown;
}
/**
 * Read to end of file: every byte is in the artifact.
 */
export interface EofStreamEndDoc {
  kind: "eof";
  [k: string]: unknown;
}
/**
 * The stream was not captured: there is no artifact.
 */
export interface NotCapturedStreamEndDoc {
  kind: "not_captured";
  [k: string]: unknown;
}
/**
 * The artifact does not hold every byte of the stream, for `why`.
 */
export interface IncompleteStreamEndDoc {
  kind: "incomplete";
  /**
   * Why an artifact does not hold every byte of its stream, from its capture receipt: tagged by
   * `kind`, its figures beside it.
   */
  why:
    | MemoryLimitIncompleteDoc
    | ArtifactCapIncompleteDoc
    | DrainEndedIncompleteDoc
    | ReaderGoneIncompleteDoc
    | HeldOutsideIncompleteDoc
    | ReadIncompleteDoc
    | ArtifactWriteIncompleteDoc
    | WordedIncompleteIncompleteDoc
    | WordedFailureIncompleteDoc;
  [k: string]: unknown;
}
/**
 * More than `kept_bytes` were produced: the result kept those, the artifact holds them all.
 */
export interface MemoryLimitIncompleteDoc {
  kept_bytes: number;
  kind: "memory_limit";
  [k: string]: unknown;
}
/**
 * The artifact reached its cap and stopped growing; the pipe was still drained.
 */
export interface ArtifactCapIncompleteDoc {
  cap_bytes: number;
  kind: "artifact_cap";
  [k: string]: unknown;
}
/**
 * The final drain ended before the stream reached end of file.
 */
export interface DrainEndedIncompleteDoc {
  drain_ms: number;
  kind: "drain_ended";
  [k: string]: unknown;
}
/**
 * The reader of the forwarded stream went away.
 */
export interface ReaderGoneIncompleteDoc {
  kind: "reader_gone";
  [k: string]: unknown;
}
/**
 * Held open outside the scope after it ended (X10).
 */
export interface HeldOutsideIncompleteDoc {
  kind: "held_outside";
  [k: string]: unknown;
}
/**
 * Reading the stream failed.
 */
export interface ReadIncompleteDoc {
  errno: number;
  kind: "read";
  [k: string]: unknown;
}
/**
 * Writing the artifact failed.
 */
export interface ArtifactWriteIncompleteDoc {
  errno: number;
  kind: "artifact_write";
  [k: string]: unknown;
}
/**
 * A version 1 capture receipt's words for an incomplete stream (it wrote no kind).
 */
export interface WordedIncompleteIncompleteDoc {
  kind: "worded_incomplete";
  words: string;
  [k: string]: unknown;
}
/**
 * A version 1 capture receipt's words for a failed capture (it wrote no kind).
 */
export interface WordedFailureIncompleteDoc {
  kind: "worded_failure";
  words: string;
  [k: string]: unknown;
}
