/* Generated from protocol/schema/spawn-failed.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * `run --detach --json` when the workload never ran: `outcome` is `spawn_failed`, as in
 * `run --json`.
 */
export interface DetachedSpawnFailedDoc {
  errno: number;
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
  [k: string]: unknown;
}
