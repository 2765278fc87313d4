/* Generated from protocol/schema/defs.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

/**
 * Why a holder counts as orphaned (adopted rather than started by its parent).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "AdopterDoc".
 */
export type AdopterDoc = InitAdopterDoc | SubreaperAdopterDoc | EndedGuardianAdopterDoc;
/**
 * Why the service refused or failed a request.
 *
 * `label_held`: A `unique` launch whose label another open scope holds.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ErrorKind".
 */
export type ErrorKind =
  | "bad_request"
  | "not_found"
  | "corrupt"
  | "no_capacity"
  | "launch_failed"
  | "stop_failed"
  | "internal"
  | "label_held";
/**
 * Why an artifact does not hold every byte of its stream, from its capture receipt: tagged by
 * `kind`, its figures beside it.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "IncompleteDoc".
 */
export type IncompleteDoc =
  | MemoryLimitIncompleteDoc
  | ArtifactCapIncompleteDoc
  | DrainEndedIncompleteDoc
  | ReaderGoneIncompleteDoc
  | HeldOutsideIncompleteDoc
  | ReadIncompleteDoc
  | ArtifactWriteIncompleteDoc
  | WordedIncompleteIncompleteDoc
  | WordedFailureIncompleteDoc;
/**
 * The `reason` beside a scope's `state` (`kind` says which).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ScopeReason".
 */
export type ScopeReason =
  | UnverifiedScopeReason
  | EarlierBootScopeReason
  | NotTheProofFilesReceiptScopeReason
  | UnboundScopeReason
  | StopFailedScopeReason
  | ErrorScopeReason;
/**
 * Why a scope is `unverified`: the check that failed (`check`), with its fields.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "UnverifiedReason".
 */
export type UnverifiedReason =
  | ProofMissingUnverifiedReason
  | ProofUnreadableUnverifiedReason
  | ProofReplacedUnverifiedReason
  | ReceiptCorruptUnverifiedReason
  | FieldMismatchUnverifiedReason
  | GuardianGoneWithoutReceiptUnverifiedReason
  | BootIdMissingUnverifiedReason
  | CurrentBootUnknownUnverifiedReason
  | MixedBootIdsUnverifiedReason;
/**
 * A receipt field bound to the registration.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "BoundField".
 */
export type BoundField = "registration" | "runtime" | "boot_id" | "guardian" | "workload" | "proof";
/**
 * What the evidence says about a registration's scope (SPEC A1), as every document shows
 * it.
 *
 * `live`: The guardian is alive: the scope may still hold processes.
 * `exited`: A verified receipt (or an ended boot) proves every process of the scope ended.
 * `unverified`: Neither proven alive nor proven ended.
 * `corrupt`: The registration record does not decode: shown, never guessed at.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "State".
 */
export type State = "live" | "exited" | "unverified" | "corrupt";
/**
 * A build's class (V1): `release` only for a clean build of the commit tagged with the
 * package's version, `source` otherwise.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "BuildClass".
 */
export type BuildClass = "release" | "source";
/**
 * Why a stop was asked for by someone other than the engine that launched the scope.
 *
 * `operator`: An operator (`stop ID`, the service's stop request).
 * `completion_deadline`: The service's maintenance loop enforced the registration's completion deadline.
 * `idle_deadline`: The service's maintenance loop enforced the registration's idle deadline.
 * `recovery`: Recovery (a restarted service, `recover`) stopped a live scope whose launcher was gone.
 * `ready_timeout`: H6: the workload was not ready within its `--ready-timeout`.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StopCause".
 */
export type StopCause =
  "operator" | "completion_deadline" | "idle_deadline" | "recovery" | "ready_timeout";
/**
 * H7: where a scope with a health check stands (docker's HEALTHCHECK states).
 *
 * `starting`: Within its start period, or no probe has decided yet.
 * `healthy`: Its last probe succeeded.
 * `unhealthy`: Its last `retries` probes failed (or timed out) in a row.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "HealthState".
 */
export type HealthState = "starting" | "healthy" | "unhealthy";
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
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "EventKind".
 */
export type EventKind =
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
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "Outcome".
 */
export type Outcome =
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
 * The kind of a managed launch (SPEC S1).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "Kind".
 */
export type Kind = "agent" | "quality" | "command" | "terminal";
/**
 * How the workload itself ended, as `status` (with `exit_code` or `signal`).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StatusName".
 */
export type StatusName = "exited" | "signaled" | "never_started" | "unknown";
/**
 * What a stop achieved.
 *
 * `already_exited`: The assessment said `exited` before anything was signalled.
 * `stopped`: The tree was stopped and the guardian's receipt proves it ended.
 * `killed_unverified`: The guardian was already gone without a receipt: the witnessed tree was killed, but
 * there is no proof (the assessment stays `unverified`).
 * `not_signalled`: `unverified` with no current-boot evidence: nothing was signalled.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StopOutcome".
 */
export type StopOutcome = "already_exited" | "stopped" | "killed_unverified" | "not_signalled";
/**
 * The stream a `follow` request reads.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "FollowStream".
 */
export type FollowStream = "stdout" | "stderr";
/**
 * What forgetting did with a whole registration (`gc`).
 *
 * `kept`: Past the horizon by its files' age, but not forgotten (the reason says why).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ForgetAction".
 */
export type ForgetAction = "forgotten" | "would_forget" | "kept";
/**
 * Why forgetting kept a registration, or forgot it: tagged by `kind`.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ForgetReason".
 */
export type ForgetReason =
  | NotExitedForgetReason
  | LockBusyForgetReason
  | RecordNotIntactForgetReason
  | ExitedPastHorizonForgetReason
  | MarkerNotRemovedForgetReason
  | RecordNotMovedForgetReason
  | RemoveFailedForgetReason;
/**
 * How a process was found to belong to a scope.
 *
 * `descendant`: Below the guardian (or below a given root).
 * `root`: A given root itself (the workload, when the guardian is gone).
 * `owner_marker`: Carries `REFINE_OWNER=<registration id>` (or descends from such a process).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "Found".
 */
export type Found = "descendant" | "root" | "owner_marker";
/**
 * How a holder's owning registration was found.
 *
 * `guardian`: The registration's guardian is an ancestor (or the process itself).
 * `marker`: `REFINE_OWNER=<id>` in its environment.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "OwnerLink".
 */
export type OwnerLink = "guardian" | "marker";
/**
 * The owning registration's state: the assessment's answer, or `unknown` for a marker that
 * names no registration under this home.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "OwnerState".
 */
export type OwnerState = "live" | "exited" | "unverified" | "unknown";
/**
 * The kind of a registration whose record does not decode.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "KindUnreadable".
 */
export type KindUnreadable = "?";
/**
 * A holder still there, and why. (A `not_orphan` entry repeats `ppid`: the holder's, then the
 * reason's, the same number.)
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "LeftDoc".
 */
export type LeftDoc =
  | LiveWorkloadLeftDoc
  | ResidueSurvivedLeftDoc
  | NotOrphanLeftDoc
  | GuardianLeftDoc
  | GuardianBelowLeftDoc
  | SurvivedLeftDoc;
/**
 * X12: the network a workload may use (`run --network`).
 *
 * `all`: As without a sandbox (the default).
 * `none`: No TCP bind or connect (Landlock ABI 4).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "NetworkAsk".
 */
export type NetworkAsk = "all" | "none";
/**
 * X11: the protection a launch asked for (`run --protect`).
 *
 * `all`: The file-system part and the scoping (the default).
 * `fs`: The file-system part only: the workload may signal outside its scope.
 * `signals`: Scoping only (signals, abstract sockets): the workload may write the home's `run/`.
 * `none`: No Landlock domain: the threat model of a same-uid workload without Landlock.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ProtectAsk".
 */
export type ProtectAsk = "all" | "fs" | "signals" | "none";
/**
 * X11: how one part of the protection stood at the launch.
 *
 * `held`: In force for the workload and every descendant.
 * `opted_out`: The launch opted out of it (`--protect`).
 * `unavailable`: The kernel has no Landlock, or an ABI too old for this part.
 * `shared_tmp`: The file-system part: the home lies beneath a shared temporary directory (world-writable
 * and sticky), where it would break `mktemp`.
 * `ready_notify`: Abstract-socket scoping: `--ready notify` needs the workload to reach the launcher's
 * abstract notify socket.
 * `unlistable`: The file-system part: a folder on the way down to `run/` could not be listed (its
 * entries are what the rules grant), so the part was left out.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ProtectPart".
 */
export type ProtectPart =
  "held" | "opted_out" | "unavailable" | "shared_tmp" | "ready_notify" | "unlistable";
/**
 * H6: how a scope says it is ready (`run --ready`).
 *
 * `notify`: `sd_notify`: a `READY=1` datagram on `$NOTIFY_SOCKET` from a process of the scope.
 * `fd`: s6's notification descriptor: a newline written on descriptor `fd`.
 * `cmd`: A probe command, run (each time as a scope of its own) until it exits 0.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ReadyMode".
 */
export type ReadyMode = "notify" | "fd" | "cmd";
/**
 * H6: where a scope with readiness stands.
 *
 * `starting`: Started, not ready yet.
 * `ready`: It said it is ready (or its probe succeeded).
 * `failed`: It was not ready in time, or ended before it was (`reason`).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ReadyState".
 */
export type ReadyState = "starting" | "ready" | "failed";
/**
 * X12: how much of the file system a sandboxed workload may write (`run --sandbox`).
 *
 * `none`: No sandbox (the default): writes as the user may.
 * `read_only`: Reads everywhere; writes only to a private temporary directory (`TMPDIR`) and the
 * terminal and null-like devices.
 * `workspace_write`: `read_only` plus the working directory and the named paths.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "SandboxMode".
 */
export type SandboxMode = "none" | "read_only" | "workspace_write";
/**
 * What recovery did (or, `--dry-run`, would do) with one registration.
 *
 * `adopted`: Live and stale, kept on its launcher's loss (L6): left running, identity checked.
 * `would_stop`: `--dry-run`: live and stale, recovery would stop it.
 * `would_adopt`: `--dry-run`: live and stale, kept on its launcher's loss: recovery would adopt it.
 * `would_release`: `--dry-run`: exited, recovery would release it.
 * `would_keep`: `--dry-run`: unverified, recovery would keep it.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "RecoverAction".
 */
export type RecoverAction =
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
/**
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "Reply".
 */
export type Reply =
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
  | EventsEndReply;
/**
 * The schema of [`crate::frame::SpawnStep`] as its mirror writes it (feature `schema`).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "SpawnStep".
 */
export type SpawnStep = "program" | "cwd" | "user" | "setup";
/**
 * A stall watch signal (SPEC H3).
 *
 * `stalled`: The tree burned CPU for N samples in a row while none of its artifacts grew.
 * `silent`: Nothing was written for M samples while the scope was alive.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StallSignal".
 */
export type StallSignal = "stalled" | "silent";
/**
 * The launch result record (`logs/ID.result`), or why it cannot be read.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ResultDoc".
 */
export type ResultDoc = ResultDocFields | ErrorResultDoc;
/**
 * Why a workload ended, where the kernel says more than its status.
 *
 * `oom`: The out-of-memory killer killed a member at the scope's memory limit.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ResultReason".
 */
export type ResultReason = "oom";
/**
 * `stop --json` (and the socket API's `stop` reply). `state` is `exited` only when a verified
 * receipt proves it. A stop that failed has `outcome: "failed"` and `error` instead of the
 * figures.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StopDoc".
 */
export type StopDoc = StopDoc1 & {
  id: string;
  outcome: StopOutcomeDoc;
  reason?: ScopeReason | null;
  state: State;
  [k: string]: unknown;
};
export type StopDoc1 = StopDocFields | ErrorStopDoc;
/**
 * The stop's own outcome, or `failed`.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StopOutcomeDoc".
 */
export type StopOutcomeDoc = StopOutcome | StopFailed;
/**
 * The `outcome` of a stop that failed (`stop --json`, the socket's `stop` reply).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StopFailed".
 */
export type StopFailed = "failed";
/**
 * How the per-workload memory reservation was derived (`capacity`).
 *
 * `floor`: No complete sample exceeded the floor.
 * `sample`: The largest complete, stable sample of a live tree.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ReservationSource".
 */
export type ReservationSource = "floor" | "sample";
/**
 * What retention did with a registration's artifacts (`gc`).
 *
 * `empty`: Nothing to do: no artifacts left.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "RetentionAction".
 */
export type RetentionAction = "deleted" | "would_delete" | "kept" | "empty";
/**
 * Why retention kept a registration's artifacts, or deleted them: tagged by `kind`.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "RetentionReason".
 */
export type RetentionReason =
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
/**
 * The scope when a launch's engine returned (`run --json` `scope`).
 *
 * `exited`: The guardian's receipt arrived: nothing of the tree is left.
 * `live`: A descendant holds the scope and the policy keeps it.
 * `stopping`: A descendant holds the scope and the shared stop ends it.
 * `unknown`: The guardian is gone without a receipt.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "RunScope".
 */
export type RunScope = "exited" | "live" | "stopping" | "unknown";
/**
 * A registration's kind as `ps` shows it: its [`Kind`](crate::Kind), or `?` when its record
 * does not decode.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ScopeKind".
 */
export type ScopeKind = Kind | KindUnreadable;
/**
 * What recovery does with a scope whose launching service is gone (SPEC L6).
 *
 * `keep`: Keep it running: the next service adopts it (its guardian captures its output).
 * `stop`: Stop it: a restarted service ends what the lost one had started.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ServiceLoss".
 */
export type ServiceLoss = "keep" | "stop";
/**
 * What `gc` did with a file no record covers (SPEC D5).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StrayAction".
 */
export type StrayAction = "removed" | "would_remove" | "kept";
/**
 * Why a file is (or would be) collected, or kept.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StrayReasonDoc".
 */
export type StrayReasonDoc =
  | NoRecordStrayReasonDoc
  | TemporaryStrayReasonDoc
  | YoungStrayReasonDoc
  | LockedStrayReasonDoc
  | FailedStrayReasonDoc
  | EndedScopeCgroupStrayReasonDoc
  | UnnamedCgroupStrayReasonDoc;
/**
 * How a stream of a `run` ended: `eof` (every byte is in the artifact), `not_captured` (no
 * artifact was made for it), or `incomplete` with `why` (the same reasons as an artifact's
 * `incomplete` in `show`).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StreamEndDoc".
 */
export type StreamEndDoc = EofStreamEndDoc | NotCapturedStreamEndDoc | IncompleteStreamEndDoc;
/**
 * Where a figure of `top` was read.
 *
 * `cgroup`: A cgroup's own accounting: the scope's cgroup v2 directory (F4), or the v1
 * directory of one of its H8 limits.
 * `proc`: Sums over the scope's processes in `/proc`.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "TopSource".
 */
export type TopSource = "cgroup" | "proc";
/**
 * How a process holds a path (`holders`).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "Via".
 */
export type Via = "cwd" | "root" | "open_file" | "mapped_file";
/**
 * The state a `wait` request waits for.
 *
 * `exited`: Not live, its output captured and its result recorded (absent: this).
 * `ready`: H6: ready (or failed to be, or ended): for a launch with readiness.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "WaitUntil".
 */
export type WaitUntil = "exited" | "ready";

/**
 * Every definition the documents of refine-supervisor's JSON contract share; each NAME.json refers into this file.
 */
export interface Definitions {
  [k: string]: unknown;
}
/**
 * Parent pid 1.
 */
export interface InitAdopterDoc {
  adopter: "init";
  [k: string]: unknown;
}
/**
 * The parent is a known subreaper outside any scope.
 */
export interface SubreaperAdopterDoc {
  adopter: "subreaper";
  pid: number;
  program: string;
  [k: string]: unknown;
}
/**
 * The parent is the guardian of a registration that is no longer live.
 */
export interface EndedGuardianAdopterDoc {
  adopter: "ended_guardian";
  id: string;
  [k: string]: unknown;
}
/**
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ApiError".
 */
export interface ApiError {
  kind: ErrorKind;
  message: string;
  [k: string]: unknown;
}
/**
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ArtifactDoc".
 */
export interface ArtifactDoc {
  bytes: number;
  exists: boolean;
  /**
   * Why the artifact does not hold every byte of its stream, as its capture receipt says
   * (a cap, a final drain, a stream held open outside the scope, X10); none when the
   * stream was read to its end or no receipt is there.
   */
  incomplete?: IncompleteDoc | null;
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
/**
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ArtifactsDoc".
 */
export interface ArtifactsDoc {
  stderr: ArtifactDoc;
  stdout: ArtifactDoc;
  [k: string]: unknown;
}
/**
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "AssessmentDoc".
 */
export interface AssessmentDoc {
  reason?: ScopeReason | null;
  state: State;
  [k: string]: unknown;
}
/**
 * `unverified`: the check that `failed`.
 */
export interface UnverifiedScopeReason {
  failed: UnverifiedReason;
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
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ProofInode".
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
  field: BoundField;
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
 * A binary's build (V1), as records and documents carry it: the package version, the commit
 * (`None`: unknown, a build outside git), whether its sources differed from that commit
 * (`None`: unknown) and its class. Made from the fixed layout a binary embeds
 * ([`crate::provenance::Provenance`]).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "BuildProvenance".
 */
export interface BuildProvenance {
  class: BuildClass;
  commit?: string | null;
  dirty?: boolean | null;
  version: string;
  [k: string]: unknown;
}
/**
 * The builds a registration recorded: `null` for a record older than provenance, or a
 * guardian that carried none.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "BuildsDoc".
 */
export interface BuildsDoc {
  guardian?: BuildProvenance | null;
  supervisor?: BuildProvenance | null;
  [k: string]: unknown;
}
/**
 * A scope's cgroup as `show` prints it.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "CgroupDoc".
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
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "CgroupUsageDoc".
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
/**
 * One event. Every field but `kind`, `id` and the time may be absent; a reader ignores keys it
 * does not know (new kinds of detail come as new keys).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "EventDoc".
 */
export interface EventDoc {
  /**
   * The process that saw the event and wrote it (a `run`, the service, a `stop`, `gc`).
   */
  by_pid: number;
  /**
   * `stop_requested`: who asked.
   */
  cause?: StopCause | null;
  /**
   * Its place in the journal: given back as `since`, the events after it are read.
   */
  cursor?: string;
  exit_code?: number | null;
  /**
   * `health`: the state it changed to.
   */
  health?: HealthState | null;
  id: string;
  kind: EventKind;
  label?: string;
  /**
   * `receipt`, `unverified`: how the launch ended.
   */
  outcome?: Outcome | null;
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
  scope_kind?: Kind | null;
  signal?: number | null;
  /**
   * `exited`, `receipt`: how the workload ended.
   */
  status?: StatusName | null;
  /**
   * `stop_ended`: what the stop achieved (absent for one that failed: see `reason`).
   */
  stop?: StopOutcome | null;
  /**
   * `time_unix_ms` as a UTC string (`2026-11-29T19:41:06.123Z`).
   */
  time?: string;
  time_unix_ms: number;
  [k: string]: unknown;
}
/**
 * The last reply of an `events` request without `follow`: the journal's end, to give as
 * `since` next time.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "EventsEndDoc".
 */
export interface EventsEndDoc {
  cursor: string;
  [k: string]: unknown;
}
/**
 * One forgetting pass.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ForgetDoc".
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
/**
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ForgetEntryDoc".
 */
export interface ForgetEntryDoc {
  action: ForgetAction;
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
  reason?: ScopeReason | null;
  state: State;
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
 * The guardian a launch would start (`$REFINE_GUARDIAN`, else beside the supervisor), and the
 * build its `.refine.provenance` section names.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "GuardianBuildDoc".
 */
export interface GuardianBuildDoc {
  path: string;
  problem?: string | null;
  /**
   * `null` when it cannot be read or carries none: `problem` says why.
   */
  provenance?: BuildProvenance | null;
  [k: string]: unknown;
}
/**
 * The registration a guardian process belongs to, in any home.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "GuardianOfDoc".
 */
export interface GuardianOfDoc {
  home: string;
  id: string;
  port: number;
  [k: string]: unknown;
}
/**
 * H7: a launch's health check (`run --health-cmd`) and where it stands.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "HealthDoc".
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
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ProbeDoc".
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
 * One process that holds the path.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "HolderDoc".
 */
export interface HolderDoc {
  /**
   * Time since the process started, milliseconds.
   */
  age_ms: number;
  /**
   * User + system CPU time, milliseconds.
   */
  cpu_ms: number;
  orphaned?: AdopterDoc | null;
  owner?: OwnerDoc | null;
  /**
   * The first reported path under the target (lossy UTF-8, as the kernel shows it).
   */
  path: string;
  pid: number;
  ppid: number;
  /**
   * The file name of `/proc/PID/exe`; `[comm]` for a kernel thread.
   */
  program: string;
  start_time: number;
  /**
   * How it holds the path: the first of cwd, root, an open file, a mapped file that does.
   */
  via: "cwd" | "root" | "open_file" | "mapped_file";
  [k: string]: unknown;
}
/**
 * The registration a holder belongs to.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "OwnerDoc".
 */
export interface OwnerDoc {
  found: OwnerLink;
  id: string;
  /**
   * The port whose `run/P` holds the record (`null` when unknown).
   */
  port?: number | null;
  state: OwnerState;
  /**
   * Whether the registration's workload process itself is still running.
   */
  workload_alive: boolean;
  [k: string]: unknown;
}
/**
 * One incident: since when, and its figures.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "IncidentDoc".
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
 * Its registration is live and its workload runs (the reap refused).
 */
export interface LiveWorkloadLeftDoc {
  reason: "live_workload";
  [k: string]: unknown;
}
/**
 * Residue of a registration whose stop did not end it.
 */
export interface ResidueSurvivedLeftDoc {
  reason: "residue_survived";
  [k: string]: unknown;
}
/**
 * No live owner, but its parent is alive and did not adopt it: not an orphan.
 */
export interface NotOrphanLeftDoc {
  parent: string;
  ppid: number;
  reason: "not_orphan";
  [k: string]: unknown;
}
/**
 * The guardian of a registration (of any home): left to that registration.
 */
export interface GuardianLeftDoc {
  guardian_of: GuardianOfDoc;
  reason: "guardian";
  [k: string]: unknown;
}
/**
 * An orphan whose tree holds a registration's guardian: left to that registration.
 */
export interface GuardianBelowLeftDoc {
  guardian_of: GuardianOfDoc;
  reason: "guardian_below";
  [k: string]: unknown;
}
/**
 * Signalled, but still alive when the budget ran out.
 */
export interface SurvivedLeftDoc {
  reason: "survived";
  [k: string]: unknown;
}
/**
 * Where a limit's controller holds the scope.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "LimitPlacementDoc".
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
 * H8: what the controllers of a scope's limits accounted.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "LimitUsageDoc".
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
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "LimitsDoc".
 */
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
 * One process of a live scope, as `show` lists it.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ProcessDoc".
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
 * A proof file's identity, with its path where the record names it.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ProofDoc".
 */
export interface ProofDoc {
  dev: number;
  ino: number;
  path?: string | null;
  [k: string]: unknown;
}
/**
 * X11: what held per launch, and at what cost.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "Protection".
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
  asked: ProtectAsk;
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
 * H6: a launch's readiness (`run --ready`) and where it stands.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ReadinessDoc".
 */
export interface ReadinessDoc {
  cmd?: string | null;
  fd?: number | null;
  mode: ReadyMode;
  probes: number;
  reason?: string | null;
  /**
   * When the state was recorded (UTC); absent while nothing was recorded yet.
   */
  since?: string | null;
  /**
   * `starting` until its launcher has recorded otherwise.
   */
  state: "starting" | "ready" | "failed";
  status?: string | null;
  timeout_ms?: number | null;
  [k: string]: unknown;
}
/**
 * A decoded receipt (`show`, `stop`, `receipt`).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ReceiptDoc".
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
  status?: StatusName | null;
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
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "WitnessDoc".
 */
export interface WitnessDoc {
  pid: number;
  start_time: number;
  [k: string]: unknown;
}
/**
 * What the whole tree cost (SPEC H4), from a version-2 receipt.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "UsageDoc".
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
 * The registration record as `show` prints it.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "RecordDoc".
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
  kind: Kind;
  label: string;
  limits: LimitsDoc;
  owner: string;
  proof: ProofDoc;
  /**
   * X11: what the workload's Landlock domain held; `null` an older record (no domain).
   */
  protection?: Protection | null;
  provenance?: BuildsDoc1;
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
 * V1: the supervisor's and the guardian's builds the registration recorded (absent from
 * an older service's reply: read as both `null`).
 */
export interface BuildsDoc1 {
  guardian?: BuildProvenance | null;
  supervisor?: BuildProvenance | null;
  [k: string]: unknown;
}
/**
 * X12: the sandbox a launch ran in, as the record keeps it.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "Sandbox".
 */
export interface Sandbox {
  mode: SandboxMode;
  network: NetworkAsk;
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
/**
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "WorkloadDoc".
 */
export interface WorkloadDoc {
  pgid: number;
  pid: number;
  sid: number;
  start_time: number;
  [k: string]: unknown;
}
/**
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "RecoverEntryDoc".
 */
export interface RecoverEntryDoc {
  action: RecoverAction;
  id: string;
  reason?: ScopeReason | null;
  state: State;
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
    step?: SpawnStep | null;
    [k: string]: unknown;
  };
}
export interface ListReply {
  list: ScopeView[];
}
/**
 * One registration as `ps` shows it (human table and `--json`).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ScopeView".
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
  health?: HealthState | null;
  id: string;
  /**
   * The launch's kind, or `?` for a record that does not decode.
   */
  kind: Kind | KindUnreadable;
  label: string;
  /**
   * The launch's outcome (`completed`, `stopped`, `timed_out`, ...) once its engine returned
   * the result; `null` before that or when no engine did.
   */
  outcome?: Outcome | null;
  pid: number;
  /**
   * H6: where a launch with readiness stands (`starting`, `ready`, `failed`); absent for
   * one without.
   */
  ready?: ReadyState | null;
  /**
   * Why the scope is `unverified` (or `corrupt`); `null` otherwise.
   */
  reason?: ScopeReason | null;
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
   * The workload's own status: `exited`, `signaled`, `never_started`, `unknown`. From the
   * receipt; while a descendant still holds the scope, as the launching engine reported it;
   * `null` while neither knows.
   */
  status?: StatusName | null;
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
 * An open stall watch incident and its figures.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StallIncident".
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
  signal: StallSignal;
  /**
   * When the incident began (wall clock of the sample that raised it).
   */
  since_unix_ms: number;
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
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ShowDoc".
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
  reason?: ScopeReason | null;
  receipt?: ReceiptDoc | null;
  record: RecordDoc;
  result?: ResultDoc | null;
  state: State;
  /**
   * The service's stall watch (H3), while an incident of this live scope is open.
   */
  watch?: WatchDoc | null;
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
  outcome: Outcome;
  /**
   * Why the workload ended when the kernel says more than its status (`oom`: killed
   * by the out-of-memory killer at its memory limit).
   */
  reason?: ResultReason | null;
  /**
   * How the stop of the scope's residue ended, once it did (D6).
   */
  residue_stop?: ResidueStopDoc | null;
  signal?: number | null;
  status?: StatusName | null;
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
 * How the stop of a launch's residue ended (SPEC D6).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ResidueStopDoc".
 */
export interface ResidueStopDoc {
  /**
   * Wall clock when the stop finished.
   */
  at_unix_ms: number;
  /**
   * Who asked for it when it was not the engine's own policy (a completion deadline).
   */
  cause?: StopCause | null;
  /**
   * Processes found in the scope and killed.
   */
  killed: number;
  outcome: StopOutcome;
  [k: string]: unknown;
}
export interface ErrorResultDoc {
  error: string;
  [k: string]: unknown;
}
/**
 * The stall watch's open incidents of a scope, as `show` prints them.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "WatchDoc".
 */
export interface WatchDoc {
  sampled_at: string;
  silent?: IncidentDoc | null;
  stalled?: IncidentDoc | null;
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
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StopTimingsDoc".
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
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "WaitDoc".
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
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "WaitScope".
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
  ready?: ReadyState | null;
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
    stream: FollowStream;
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
    stream: FollowStream;
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
 * An `events` request's last reply (without `follow`): the cursor after the last event.
 */
export interface EventsEndReply {
  events_end: EventsEndDoc;
}
/**
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "RetentionEntryDoc".
 */
export interface RetentionEntryDoc {
  action: RetentionAction;
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
  reason?: ScopeReason | null;
  state: State;
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
 * One tree sample.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "SampleDoc".
 */
export interface SampleDoc {
  complete: boolean;
  members: number;
  reason?: string | null;
  rss_bytes: number;
  [k: string]: unknown;
}
/**
 * X12: the sandbox a launch asks for (the socket API's `sandbox` object).
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "SandboxAsk".
 */
export interface SandboxAsk {
  /**
   * X12: how much of the file system a sandboxed workload may write (`run --sandbox`).
   *
   * `none`: No sandbox (the default): writes as the user may.
   * `read_only`: Reads everywhere; writes only to a private temporary directory (`TMPDIR`) and the
   * terminal and null-like devices.
   * `workspace_write`: `read_only` plus the working directory and the named paths.
   */
  mode?: "none" | "read_only" | "workspace_write";
  /**
   * X12: the network a workload may use (`run --network`).
   *
   * `all`: As without a sandbox (the default).
   * `none`: No TCP bind or connect (Landlock ABI 4).
   */
  network?: "all" | "none";
  /**
   * With `workspace_write`: more writable paths (absolute, or relative to the working
   * directory; each must exist). Absent: none.
   */
  paths?: string[];
}
/**
 * How a residue scope's stop ended.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "ScopeStopDoc".
 */
export interface ScopeStopDoc {
  error?: string | null;
  id: string;
  /**
   * The stop's outcome, or `null` when it failed (see `error`).
   */
  outcome?: StopOutcome | null;
  port: number;
  /**
   * Whether the scope's receipt verifies after the stop.
   */
  receipt_verified: boolean;
  [k: string]: unknown;
}
/**
 * A file no record covers.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StrayDoc".
 */
export interface StrayDoc {
  action: StrayAction;
  bytes: number;
  /**
   * The registration the file is named for, when its name says.
   */
  id?: string | null;
  path: string;
  reason: StrayReasonDoc;
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
/**
 * One captured stream of a `run`.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "StreamDoc".
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
  why: IncompleteDoc;
  [k: string]: unknown;
}
/**
 * One live scope's figures.
 *
 * This interface was referenced by `Definitions`'s JSON-Schema
 * via the `definition` "TopScopeDoc".
 */
export interface TopScopeDoc {
  /**
   * Bytes read from and written to block devices so far: `io.stat` (v2 `rbytes`, `wbytes`),
   * or the processes' `read_bytes`, `write_bytes` in `/proc/PID/io` (their reaped children
   * included, processes that already ended not).
   */
  block_read_bytes: number;
  block_write_bytes: number;
  /**
   * CPU time spent during the window, in percent of one core (`200.0`: two cores busy).
   */
  cpu_percent: number;
  /**
   * CPU time spent during the window, microseconds.
   */
  cpu_window_us: number;
  id: string;
  io_source: TopSource;
  kind: Kind;
  label: string;
  /**
   * Memory in use at the second sample: the cgroup's `memory.current` (v2) or
   * `memory.usage_in_bytes` (v1), page cache included; or the sum of the processes' resident
   * sets (`VmRSS`), where shared pages count once per process.
   */
  memory_bytes: number;
  memory_source: TopSource;
  /**
   * Tasks (threads) at the second sample: `pids.current`, or the processes' `Threads`.
   */
  pids: number;
  pids_source: TopSource;
  /**
   * Where a figure of `top` was read.
   *
   * `cgroup`: A cgroup's own accounting: the scope's cgroup v2 directory (F4), or the v1
   * directory of one of its H8 limits.
   * `proc`: Sums over the scope's processes in `/proc`.
   */
  source: "cgroup" | "proc";
  /**
   * The window this scope was measured over (between its two samples), microseconds.
   */
  window_us: number;
  [k: string]: unknown;
}
