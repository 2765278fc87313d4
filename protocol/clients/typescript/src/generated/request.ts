/* Generated from protocol/schema/request.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

export type Request =
  | LaunchRequest
  | ListRequest
  | ShowRequest
  | StopRequest
  | WaitRequest
  | SignalRequest
  | InputRequest
  | FollowRequest
  | EventsRequest;

/**
 * What the caller of a launch asks (`run`, `run --detach`, the service's `launch` request): the
 * kind as a [`Kind`], the deadlines as [`Duration`]s. On the wire the kind is its lowercase name
 * and the durations are whole milliseconds (`timeout_ms`, `idle_timeout_ms`,
 * `wait_for_slot_ms`).
 */
export interface LaunchRequest {
  /**
   * Let the workload join PID and user namespaces made outside its scope (SPEC X7's
   * opt-out): no filter against `setns` into them. Absent: `false`, the filter holds.
   */
  allow_setns?: boolean;
  argv: string[];
  /**
   * H8: the tree's CPU bandwidth in thousandths of a core (`run --cpus 0.5`: 500).
   */
  cpu_millis?: number | null;
  /**
   * The workload's working directory. Absent: the service's own (where `serve` was
   * started): the service cannot know its client's, so a host passes its own.
   */
  cwd?: string | null;
  /**
   * The scope belongs to the connection that launched it: when that connection ends (the
   * client closed it, crashed or was dropped), the service stops the scope (SIGTERM, its
   * shutdown grace, then the whole tree), and a restarted service stops it too (its
   * `on_service_loss` defaults to `stop`). Absent: `false`, the scope outlives its client.
   */
  end_with_connection?: boolean;
  /**
   * Variables set for the workload, as `run --env`. Absent: none.
   */
  env?: {
    [k: string]: string;
  };
  /**
   * H7: the health probe, a shell command line (`sh -c`), as `run --health-cmd`. Absent: no
   * health check.
   */
  health_cmd?: string | null;
  /**
   * H7: between probes (absent: 30 s).
   */
  health_interval_ms?: number | null;
  /**
   * H7: consecutive failures that make it `unhealthy` (absent: 3).
   */
  health_retries?: number | null;
  /**
   * H7: from the start, failures do not count (absent: 0).
   */
  health_start_period_ms?: number | null;
  /**
   * H7: a probe running longer is stopped and fails (absent: 30 s).
   */
  health_timeout_ms?: number | null;
  /**
   * Idle deadline.
   */
  idle_timeout_ms?: number | null;
  /**
   * The workload's stdin is a pipe the service holds, fed and closed by `input` requests.
   * Absent: `false`, stdin is `/dev/null`.
   */
  input?: boolean;
  /**
   * A deadline's grace: SIGTERM first, the kill this much later (`timeout -k`).
   */
  kill_after_ms?: number | null;
  /**
   * Absent: `command`, as `run` without `--kind`.
   */
  kind?: "agent" | "quality" | "command" | "terminal";
  /**
   * Absent: none (empty), as `run` without `--label`.
   */
  label?: string;
  /**
   * Byte cap of each output artifact: absent for the default (1 GiB), `0` for none.
   */
  log_cap_bytes?: number | null;
  /**
   * H8: the whole tree's memory limit, bytes (`run --memory-max`). Absent: none.
   */
  memory_max_bytes?: number | null;
  /**
   * Purpose metadata (`key=value`, `run --meta`). Absent: none.
   */
  meta?: {
    [k: string]: string;
  };
  /**
   * What a restarted service does with the scope once this one is lost (L6). Absent:
   * `keep`, but `stop` for an agent.
   */
  on_service_loss?: ("keep" | "stop") | null;
  op: "launch";
  /**
   * H8: the most processes and threads the tree holds at once (`run --pids-max`).
   */
  pids_max?: number | null;
  /**
   * X11: the Landlock protection (`all`, `fs`, `signals`, `none`). Absent: `all`.
   */
  protect?: "all" | "fs" | "signals" | "none";
  /**
   * Run the workload on a terminal. Absent: `false`.
   */
  pty?: boolean;
  /**
   * H6: how the workload says it is ready, as `run --ready` takes it: `notify`, `fd=N` or
   * `cmd=COMMAND`. Absent: ready at its `execve`.
   */
  ready?: string | null;
  /**
   * H6: how long it has to be ready before its scope is stopped (absent: 90 s; `0`: no
   * bound).
   */
  ready_timeout_ms?: number | null;
  /**
   * X12: the sandbox (`{"mode": "read_only" | "workspace_write" | "none", "paths": [...],
   * "network": "none" | "all"}`). Absent: none.
   */
  sandbox?: SandboxAsk | null;
  /**
   * Completion deadline from the start.
   */
  timeout_ms?: number | null;
  /**
   * One scope per label at a time (s6-style): refused while another scope with this label
   * is live or unverified (`label_held`). Absent: `false`.
   */
  unique?: boolean;
  /**
   * Run the workload as `USER[:GROUP]` (names or numbers; SPEC X1). Absent: as the service.
   */
  user?: string | null;
  /**
   * The API version: 2 (a service refuses a newer one and still reads 1).
   */
  v: 2;
  /**
   * For `agent` launches when no slot is free: wait (up to this long) instead of refusing.
   */
  wait_for_slot_ms?: number | null;
}
/**
 * X12: the sandbox a launch asks for (the socket API's `sandbox` object).
 */
export interface SandboxAsk {
  /**
   * Absent: `none`.
   */
  mode?: "none" | "read_only" | "workspace_write";
  /**
   * Absent: `all`.
   */
  network?: "all" | "none";
  /**
   * With `workspace_write`: more writable paths (absolute, or relative to the working
   * directory; each must exist). Absent: none.
   */
  paths?: string[];
}
export interface ListRequest {
  all?: boolean;
  op: "list";
  /**
   * The API version: 2 (a service refuses a newer one and still reads 1).
   */
  v: 2;
}
export interface ShowRequest {
  id: string;
  op: "show";
  /**
   * The API version: 2 (a service refuses a newer one and still reads 1).
   */
  v: 2;
}
export interface StopRequest {
  /**
   * T7: a grace before the quiesce: the polite signal to the workload's process group,
   * then up to this long for the scope to end by itself (`stop --grace`). Absent: none.
   */
  grace_ms?: number | null;
  id: string;
  op: "stop";
  /**
   * The grace's polite signal, as `stop --signal` takes it (`TERM`, `SIGUSR1`, `15`);
   * SIGTERM when absent. Only with `grace_ms`.
   */
  signal?: string | null;
  /**
   * The API version: 2 (a service refuses a newer one and still reads 1).
   */
  v: 2;
}
/**
 * Until the scope is `until` (as `wait`: it ended and its launcher recorded its output and
 * result), or `timeout_ms` passed (the reply says `timed_out`; the scope is left alone).
 */
export interface WaitRequest {
  id: string;
  op: "wait";
  /**
   * Absent: no limit.
   */
  timeout_ms?: number | null;
  /**
   * The state a `wait` request waits for.
   *
   * `exited`: Not live, its output captured and its result recorded (absent: this).
   * `ready`: H6: ready (or failed to be, or ended): for a launch with readiness.
   */
  until?: "exited" | "ready";
  /**
   * The API version: 2 (a service refuses a newer one and still reads 1).
   */
  v: 2;
}
/**
 * A signal to the workload's process group (as the grace of a stop sends it), nothing
 * else: the scope is not stopped and no stop is recorded.
 */
export interface SignalRequest {
  id: string;
  op: "signal";
  /**
   * A name or number, as `stop --signal` takes it (`TERM`, `SIGUSR1`, `15`).
   */
  signal: string;
  /**
   * The API version: 2 (a service refuses a newer one and still reads 1).
   */
  v: 2;
}
/**
 * Text written to the stdin of a scope this service launched with `input: true` (waits
 * at most 10 s for the workload to take it), then, with `close`, its end of file.
 */
export interface InputRequest {
  /**
   * Close the stdin after `data`. Absent: `false`.
   */
  close?: boolean;
  data?: string;
  id: string;
  op: "input";
  /**
   * The API version: 2 (a service refuses a newer one and still reads 1).
   */
  v: 2;
}
/**
 * The output of a stream as it is written (L1's artifact, read from `from_offset`, or
 * from the first batch moved at or after `from_unix_ms` by the time index; absent: the
 * start): `output` replies as it grows, then one `followed` once the scope has exited and
 * its output is all captured. The connection then takes requests again.
 */
export interface FollowRequest {
  from_offset?: number | null;
  from_unix_ms?: number | null;
  id: string;
  op: "follow";
  /**
   * The stream a `follow` request reads.
   */
  stream: "stdout" | "stderr";
  /**
   * The API version: 2 (a service refuses a newer one and still reads 1).
   */
  v: 2;
}
/**
 * V2: the journal's events after the cursor `since` (absent: from the oldest kept), or at
 * or after `since_unix_ms`, before `until_unix_ms`, of the `kinds` asked (absent: all)
 * and of the scope `scope` (an id, a prefix or a label; absent: every scope): one `event`
 * reply each, then `events_end` with the cursor to resume from; with `follow`, then every
 * new event as it is written, until `until_unix_ms` passes or the client closes.
 */
export interface EventsRequest {
  follow?: boolean;
  kinds?: (
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
    | "health"
  )[];
  op: "events";
  scope?: string | null;
  since?: string | null;
  since_unix_ms?: number | null;
  until_unix_ms?: number | null;
  /**
   * The API version: 2 (a service refuses a newer one and still reads 1).
   */
  v: 2;
}
