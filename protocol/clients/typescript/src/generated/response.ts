/* Generated from protocol/schema/response.json by scripts/generate-types.mjs (json-schema-to-typescript).
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

export interface Response {
  error?: ApiError | null;
  ok: boolean;
  result?:
    | (
        | LaunchedReply
        | SpawnFailedReply
        | ListReply
        | ShowReply
        | StopReply
        | WaitReply
        | SignalledReply
        | InputReply
        | OutputReply
        | FollowedReply
        | EventReply
        | EventsEndReply
      )
    | null;
  v: number;
  [k: string]: unknown;
}
export interface ApiError {
  /**
   * Why the service refused or failed a request.
   *
   * `label_held`: A `unique` launch whose label another open scope holds.
   */
  kind:
    | "bad_request"
    | "not_found"
    | "corrupt"
    | "no_capacity"
    | "launch_failed"
    | "stop_failed"
    | "internal"
    | "label_held";
  message: string;
  [k: string]: unknown;
}
export interface LaunchedReply {
  launched: {
    id: string;
    [k: string]: unknown;
  };
}
/**
 * The registration was made but the workload never ran: the `step` (W13: the program,
 * the working directory, the user switch) failed with `errno`. A service before W13 sent
 * no step.
 */
export interface SpawnFailedReply {
  spawn_failed: {
    errno: number;
    id: string;
    step?: ("program" | "cwd" | "user" | "setup") | null;
    [k: string]: unknown;
  };
}
export interface ListReply {
  list: ScopeView[];
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
/**
 * The `show --json` document.
 */
export interface ShowReply {
  show: ShowDoc;
}
/**
 * `show --json` (and the socket's `show` reply): record, result, receipt, assessment,
 * artifacts.
 */
export interface ShowDoc {
  artifacts: ArtifactsDoc;
  assessment: AssessmentDoc;
  /**
   * H7: the health check it asked for, where it stands and its last probes; absent for a
   * launch without.
   */
  health?: HealthDoc | null;
  id: string;
  /**
   * The scope's processes now (below the guardian, or carrying its owner marker), while it
   * is live; empty otherwise.
   */
  processes: ProcessDoc[];
  /**
   * H6: the readiness it asked for and where it stands; absent for a launch without.
   */
  readiness?: ReadinessDoc | null;
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
  receipt?: ReceiptDoc | null;
  record: RecordDoc;
  result?: (ResultDocFields | ErrorResultDoc) | null;
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
  /**
   * The service's stall watch (H3), while an incident of this live scope is open.
   */
  watch?: WatchDoc | null;
  [k: string]: unknown;
}
export interface ArtifactsDoc {
  stderr: ArtifactDoc;
  stdout: ArtifactDoc;
  [k: string]: unknown;
}
export interface ArtifactDoc {
  bytes: number;
  exists: boolean;
  /**
   * Why the artifact does not hold every byte of its stream, as its capture receipt says
   * (a cap, a final drain, a stream held open outside the scope, X10); none when the
   * stream was read to its end or no receipt is there.
   */
  incomplete?:
    | (
        | MemoryLimitIncompleteDoc
        | ArtifactCapIncompleteDoc
        | DrainEndedIncompleteDoc
        | ReaderGoneIncompleteDoc
        | HeldOutsideIncompleteDoc
        | ReadIncompleteDoc
        | ArtifactWriteIncompleteDoc
        | WordedIncompleteIncompleteDoc
        | WordedFailureIncompleteDoc
      )
    | null;
  path: string;
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
export interface AssessmentDoc {
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
 * H7: a launch's health check (`run --health-cmd`) and where it stands.
 */
export interface HealthDoc {
  cmd: string;
  failing_streak: number;
  interval_ms: number;
  /**
   * The last few probes, oldest first.
   */
  last: ProbeDoc[];
  probes: number;
  retries: number;
  start_period_ms: number;
  /**
   * H7: where a scope with a health check stands (docker's HEALTHCHECK states).
   *
   * `starting`: Within its start period, or no probe has decided yet.
   * `healthy`: Its last probe succeeded.
   * `unhealthy`: Its last `retries` probes failed (or timed out) in a row.
   */
  state: "starting" | "healthy" | "unhealthy";
  timeout_ms: number;
  [k: string]: unknown;
}
/**
 * H7: one health probe.
 */
export interface ProbeDoc {
  duration_ms: number;
  /**
   * Its exit code; `null`: it timed out, was killed, or did not run.
   */
  exit_code?: number | null;
  /**
   * The start of its output (stdout then stderr), lossily UTF-8 (views escape it).
   */
  output: string;
  /**
   * When it started (UTC).
   */
  start: string;
  timed_out: boolean;
  [k: string]: unknown;
}
/**
 * One process of a live scope, as `show` lists it.
 */
export interface ProcessDoc {
  args: string[];
  /**
   * User plus system CPU time.
   */
  cpu_ms: number;
  /**
   * `descendant` (below the guardian) or `owner_marker` (carries `REFINE_OWNER`).
   */
  found: "descendant" | "root" | "owner_marker";
  pid: number;
  ppid: number;
  /**
   * The executable's file name (else `comm`).
   */
  program: string;
  rss_bytes: number;
  start_time: number;
  /**
   * `running`, `sleeping`, `stopped`, `zombie`, ... (the kernel's word).
   */
  state: string;
  [k: string]: unknown;
}
/**
 * H6: a launch's readiness (`run --ready`) and where it stands.
 */
export interface ReadinessDoc {
  cmd?: string | null;
  fd?: number | null;
  /**
   * H6: how a scope says it is ready (`run --ready`).
   *
   * `notify`: `sd_notify`: a `READY=1` datagram on `$NOTIFY_SOCKET` from a process of the scope.
   * `fd`: s6's notification descriptor: a newline written on descriptor `fd`.
   * `cmd`: A probe command, run (each time as a scope of its own) until it exits 0.
   */
  mode: "notify" | "fd" | "cmd";
  probes: number;
  reason?: string | null;
  /**
   * When the state was recorded (UTC); absent while nothing was recorded yet.
   */
  since?: string | null;
  /**
   * H6: where a scope with readiness stands.
   *
   * `starting`: Started, not ready yet.
   * `ready`: It said it is ready (or its probe succeeded).
   * `failed`: It was not ready in time, or ended before it was (`reason`).
   */
  state: "starting" | "ready" | "failed";
  status?: string | null;
  timeout_ms?: number | null;
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
 * The registration record as `show` prints it.
 */
export interface RecordDoc {
  /**
   * X7: `false` the workload ran under the filter refusing `setns` into a PID or user
   * namespace; `true` it opted out (`--allow-setns`); `null` an older record (no filter).
   */
  allow_setns?: boolean | null;
  /**
   * The command as text (U+FFFD where it is not UTF-8).
   */
  argv: string[];
  /**
   * The command's exact bytes, each argument an array of numbers; present only when an
   * argument is not UTF-8.
   */
  argv_bytes?: number[][] | null;
  boot_id: string;
  /**
   * The scope's own cgroup (F4), when one was made.
   */
  cgroup?: CgroupDoc | null;
  cwd: string;
  guardian: WitnessDoc;
  id: string;
  /**
   * The kind of a managed launch (SPEC S1).
   */
  kind: "agent" | "quality" | "command" | "terminal";
  label: string;
  limits: LimitsDoc;
  owner: string;
  proof: ProofDoc;
  /**
   * X11: what the workload's Landlock domain held; `null` an older record (no domain).
   */
  protection?: Protection | null;
  provenance?: BuildsDoc;
  pty: boolean;
  purpose: {
    [k: string]: string;
  };
  runtime: string;
  /**
   * X12: the sandbox the workload ran in; `null` none (or an older record).
   */
  sandbox?: Sandbox | null;
  scope_policy: string;
  started: string;
  started_at_unix_ms: number;
  stderr: string;
  stdin?: string | null;
  stdout: string;
  workload: WorkloadDoc;
  [k: string]: unknown;
}
/**
 * A scope's cgroup as `show` prints it.
 */
export interface CgroupDoc {
  /**
   * `false`: the kernel refused the clone3 (`refused_errno`); the scope runs outside it.
   */
  forked_into: boolean;
  path: string;
  refused_errno?: number | null;
  /**
   * What the kernel accounted to it so far; `null` once it is removed (after the receipt:
   * the result's `cgroup_usage` then holds the final figures).
   */
  usage?: CgroupUsageDoc | null;
  [k: string]: unknown;
}
/**
 * What the kernel accounted to a scope's cgroup.
 */
export interface CgroupUsageDoc {
  /**
   * `cpu.stat` `usage_usec`, `user_usec`, `system_usec`.
   */
  cpu_us: number;
  /**
   * `memory.peak` in bytes; `null`: the memory controller is not enabled for the subtree.
   */
  memory_peak_bytes?: number | null;
  /**
   * `memory.events` `oom_kill`; `null` likewise.
   */
  oom_kills?: number | null;
  system_us: number;
  user_us: number;
  [k: string]: unknown;
}
export interface LimitsDoc {
  completion_timeout_ms?: number | null;
  /**
   * H8: CPU bandwidth in thousandths of a core (`--cpus 0.5`: 500).
   */
  cpu_millis?: number | null;
  idle_timeout_ms?: number | null;
  log_cap_bytes?: number | null;
  /**
   * H8 (absent without a limit).
   */
  memory_max_bytes?: number | null;
  pids_max?: number | null;
  /**
   * H8: the cgroup directory of each limit's controller.
   */
  placements?: LimitPlacementDoc[];
  [k: string]: unknown;
}
/**
 * Where a limit's controller holds the scope.
 */
export interface LimitPlacementDoc {
  /**
   * `memory`, `cpu` or `pids`.
   */
  controller: string;
  dir: string;
  /**
   * The unified hierarchy (cgroup v2) or a v1 one.
   */
  unified: boolean;
  [k: string]: unknown;
}
/**
 * X11: what held per launch, and at what cost.
 */
export interface Protection {
  /**
   * The kernel's Landlock ABI (0: none).
   */
  abi: number;
  /**
   * Connections to abstract unix sockets made outside the domain (ABI 6).
   */
  abstract_sockets:
    "held" | "opted_out" | "unavailable" | "shared_tmp" | "ready_notify" | "unlistable";
  /**
   * X11: the protection a launch asked for (`run --protect`).
   *
   * `all`: The file-system part and the scoping (the default).
   * `fs`: The file-system part only: the workload may signal outside its scope.
   * `signals`: Scoping only (signals, abstract sockets): the workload may write the home's `run/`.
   * `none`: No Landlock domain: the threat model of a same-uid workload without Landlock.
   */
  asked: "all" | "fs" | "signals" | "none";
  /**
   * Writes, truncation, renames, links and removals under the home's `run/`, reads of
   * scopes' output.
   */
  fs: "held" | "opted_out" | "unavailable" | "shared_tmp" | "ready_notify" | "unlistable";
  /**
   * Whether the workload started with `no_new_privs` (item 4: set by an unprivileged
   * launcher, which needs it for Landlock; setuid programs then gain nothing).
   */
  no_new_privs: boolean;
  /**
   * The rules the domain holds.
   */
  rules: number;
  /**
   * Signals to processes outside the scope's domain (ABI 6).
   */
  signals: "held" | "opted_out" | "unavailable" | "shared_tmp" | "ready_notify" | "unlistable";
  [k: string]: unknown;
}
/**
 * V1: the supervisor's and the guardian's builds the registration recorded (absent from
 * an older service's reply: read as both `null`).
 */
export interface BuildsDoc {
  guardian?: BuildProvenance | null;
  supervisor?: BuildProvenance | null;
  [k: string]: unknown;
}
/**
 * A binary's build (V1), as records and documents carry it: the package version, the commit
 * (`None`: unknown, a build outside git), whether its sources differed from that commit
 * (`None`: unknown) and its class. Made from the fixed layout a binary embeds
 * ([`crate::provenance::Provenance`]).
 */
export interface BuildProvenance {
  /**
   * A build's class (V1): `release` only for a clean build of the commit tagged with the
   * package's version, `source` otherwise.
   */
  class: "release" | "source";
  commit?: string | null;
  dirty?: boolean | null;
  version: string;
  [k: string]: unknown;
}
/**
 * X12: the sandbox a launch ran in, as the record keeps it.
 */
export interface Sandbox {
  /**
   * X12: how much of the file system a sandboxed workload may write (`run --sandbox`).
   *
   * `none`: No sandbox (the default): writes as the user may.
   * `read_only`: Reads everywhere; writes only to a private temporary directory (`TMPDIR`) and the
   * terminal and null-like devices.
   * `workspace_write`: `read_only` plus the working directory and the named paths.
   */
  mode: "none" | "read_only" | "workspace_write";
  /**
   * X12: the network a workload may use (`run --network`).
   *
   * `all`: As without a sandbox (the default).
   * `none`: No TCP bind or connect (Landlock ABI 4).
   */
  network: "all" | "none";
  /**
   * The private temporary directory made for the launch (its `TMPDIR`).
   */
  tmpdir?: string | null;
  /**
   * The workspace's writable roots, canonical (the working directory first, then the named
   * paths); empty for `read_only` and `none`.
   */
  writable: string[];
  [k: string]: unknown;
}
export interface WorkloadDoc {
  pgid: number;
  pid: number;
  sid: number;
  start_time: number;
  [k: string]: unknown;
}
/**
 * The three status keys every document that reports a workload status carries.
 */
export interface ResultDocFields {
  /**
   * The final accounting of the scope's own cgroup (F4), read after the receipt;
   * absent where there was none (the `/proc` path) or it could not be read.
   */
  cgroup_usage?: CgroupUsageDoc | null;
  exit_code?: number | null;
  /**
   * H8: what the limits' controllers accounted (a scope with limits only).
   */
  limit_usage?: LimitUsageDoc | null;
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
   * Why the workload ended when the kernel says more than its status (`oom`: killed
   * by the out-of-memory killer at its memory limit).
   */
  reason?: "oom" | null;
  /**
   * How the stop of the scope's residue ended, once it did (D6).
   */
  residue_stop?: ResidueStopDoc | null;
  signal?: number | null;
  status?: ("exited" | "signaled" | "never_started" | "unknown") | null;
  /**
   * Why the stop of the scope's residue failed (outcome `stop_failed`).
   */
  stop_failure?: string | null;
  /**
   * What the tree cost (H4), once the receipt is in.
   */
  usage?: UsageDoc | null;
  written_at: string;
  [k: string]: unknown;
}
/**
 * H8: what the controllers of a scope's limits accounted.
 */
export interface LimitUsageDoc {
  memory_peak_bytes?: number | null;
  oom_kills?: number | null;
  pids_peak?: number | null;
  /**
   * Forks refused at `pids_max`.
   */
  pids_refused?: number | null;
  throttled_us?: number | null;
  [k: string]: unknown;
}
/**
 * How the stop of a launch's residue ended (SPEC D6).
 */
export interface ResidueStopDoc {
  /**
   * Wall clock when the stop finished.
   */
  at_unix_ms: number;
  /**
   * Who asked for it when it was not the engine's own policy (a completion deadline).
   */
  cause?:
    ("operator" | "completion_deadline" | "idle_deadline" | "recovery" | "ready_timeout") | null;
  /**
   * Processes found in the scope and killed.
   */
  killed: number;
  /**
   * What a stop achieved.
   *
   * `already_exited`: The assessment said `exited` before anything was signalled.
   * `stopped`: The tree was stopped and the guardian's receipt proves it ended.
   * `killed_unverified`: The guardian was already gone without a receipt: the witnessed tree was killed, but
   * there is no proof (the assessment stays `unverified`).
   * `not_signalled`: `unverified` with no current-boot evidence: nothing was signalled.
   */
  outcome: "already_exited" | "stopped" | "killed_unverified" | "not_signalled";
  [k: string]: unknown;
}
export interface ErrorResultDoc {
  error: string;
  [k: string]: unknown;
}
/**
 * The stall watch's open incidents of a scope, as `show` prints them.
 */
export interface WatchDoc {
  sampled_at: string;
  silent?: IncidentDoc | null;
  stalled?: IncidentDoc | null;
  [k: string]: unknown;
}
/**
 * One incident: since when, and its figures.
 */
export interface IncidentDoc {
  /**
   * The tree's average CPU over the last samples, percent of one core.
   */
  cpu_percent: number;
  last_write: string;
  /**
   * Busy samples in a row (stalled) or samples without a write (silent).
   */
  samples: number;
  since: string;
  [k: string]: unknown;
}
/**
 * The `stop --json` document.
 */
export interface StopReply {
  stop: StopDoc;
}
export interface StopDocFields {
  killed: number;
  receipt?: ReceiptDoc | null;
  signalled: number;
  timings_us: StopTimingsDoc;
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
 * The `wait --json` document, of the one scope asked about.
 */
export interface WaitReply {
  wait: WaitDoc;
}
/**
 * `wait --json`: the scopes in the order given.
 */
export interface WaitDoc {
  scopes: WaitScope[];
  /**
   * `--timeout` passed first (the exit is 124).
   */
  timed_out: boolean;
  [k: string]: unknown;
}
/**
 * One scope of `wait --json`.
 */
export interface WaitScope {
  /**
   * The code `run` would exit with (128+N for signal N, 127 never started, 255 unknown);
   * `null` while live.
   */
  exit_code?: number | null;
  id: string;
  /**
   * H6 (`wait --for ready`): `ready`, `failed`, or `starting` when the wait timed out
   * first; absent for a wait for the end.
   */
  ready?: ("starting" | "ready" | "failed") | null;
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
 * A `signal` request's answer: `delivered` is `false` when the scope was over or no
 * process of the workload's group was left to take it.
 */
export interface SignalledReply {
  signalled: {
    delivered: boolean;
    id: string;
    [k: string]: unknown;
  };
}
/**
 * An `input` request's answer: the bytes written, whether the stdin is now closed.
 */
export interface InputReply {
  input: {
    closed: boolean;
    id: string;
    written: number;
    [k: string]: unknown;
  };
}
/**
 * A `follow` request's bytes: `data_b64` (standard base64 of the workload's exact bytes)
 * found in the artifact at `offset`.
 */
export interface OutputReply {
  output: {
    data_b64: string;
    offset: number;
    /**
     * The stream a `follow` request reads.
     */
    stream: "stdout" | "stderr";
    [k: string]: unknown;
  };
}
/**
 * A `follow` request's last reply: the scope has exited and its output is all captured;
 * `end_offset` is the artifact's length, `complete` whether the capture took every byte
 * (no cap reached, no write failed).
 */
export interface FollowedReply {
  followed: {
    complete: boolean;
    end_offset: number;
    /**
     * The stream a `follow` request reads.
     */
    stream: "stdout" | "stderr";
    [k: string]: unknown;
  };
}
/**
 * An `events` request's event.
 */
export interface EventReply {
  event: EventDoc;
}
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
/**
 * An `events` request's last reply (without `follow`): the cursor after the last event.
 */
export interface EventsEndReply {
  events_end: EventsEndDoc;
}
/**
 * The last reply of an `events` request without `follow`: the journal's end, to give as
 * `since` next time.
 */
export interface EventsEndDoc {
  cursor: string;
  [k: string]: unknown;
}
