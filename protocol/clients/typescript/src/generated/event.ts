/* Generated from protocol/schema/event.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * One event. Every field but `kind`, `id` and the time may be absent; a reader ignores keys it
 * does not know (new kinds of detail come as new keys).
 */
export interface EventDoc {
  /**
   * The process that saw the event and wrote it (a `run`, the service, a `stop`, `gc`).
   */
  by_pid: number;
  /**
   * `stop_requested`: who asked.
   */
  cause?:
    ("operator" | "completion_deadline" | "idle_deadline" | "recovery" | "ready_timeout") | null;
  /**
   * Its place in the journal: given back as `since`, the events after it are read.
   */
  cursor?: string;
  exit_code?: number | null;
  /**
   * `health`: the state it changed to.
   */
  health?: ("starting" | "healthy" | "unhealthy") | null;
  id: string;
  /**
   * What happened to a scope.
   *
   * `launched`: Its registration is durable (before the workload runs).
   * `started`: Its workload's `execve` succeeded (`pid`).
   * `exited`: Its workload's main process ended (`status` with `exit_code` or `signal`); the rest
   * of its tree may live on.
   * `receipt`: Its guardian's receipt is in: everything it started has ended (`outcome`).
   * `stop_requested`: A stop was asked for (`cause`), before its first signal.
   * `stop_ended`: A stop is over (`stop`: what it achieved, or `reason` for one that failed).
   * `unverified`: Its launch ended without a receipt: nothing proves the tree ended (`reason`).
   * `adopted`: A restarted service took over a live scope whose launcher was gone.
   * `collected`: `gc` or the service's housekeeping forgot its registration.
   * `ready`: H6: it said it is ready (`status`: its `STATUS=`, if any).
   * `not_ready`: H6: it was not ready in time, or ended before it was (`reason`).
   * `health`: H7: its health changed (`health`: the new state, `reason`: the last probe's
   * excerpt, escaped).
   */
  kind:
    | "launched"
    | "started"
    | "exited"
    | "receipt"
    | "stop_requested"
    | "stop_ended"
    | "unverified"
    | "adopted"
    | "collected"
    | "ready"
    | "not_ready"
    | "health";
  label?: string;
  /**
   * `receipt`, `unverified`: how the launch ended.
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
  /**
   * `started`: the workload's pid.
   */
  pid?: number | null;
  /**
   * `ready`: the workload's last `STATUS=` (sd_notify), as it sent it.
   */
  ready_status?: string | null;
  /**
   * `unverified`, a failed `stop_ended`, `not_ready`: why, in words.
   */
  reason?: string | null;
  /**
   * `launched`: the kind of workload.
   */
  scope_kind?: ("agent" | "quality" | "command" | "terminal") | null;
  signal?: number | null;
  /**
   * `exited`, `receipt`: how the workload ended.
   */
  status?: ("exited" | "signaled" | "never_started" | "unknown") | null;
  /**
   * `stop_ended`: what the stop achieved (absent for one that failed: see `reason`).
   */
  stop?: ("already_exited" | "stopped" | "killed_unverified" | "not_signalled") | null;
  /**
   * `time_unix_ms` as a UTC string (`2026-11-29T19:41:06.123Z`).
   */
  time?: string;
  time_unix_ms: number;
  [k: string]: unknown;
}
