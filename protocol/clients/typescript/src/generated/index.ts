/* Generated from protocol/schema/*.json by scripts/generate-types.mjs (json-schema-to-typescript).
 * Do not edit: change the Rust document types, regenerate the schemas, then run
 * `npm run generate-types`; `npm run check-types` fails while this file is stale. */

export type {
  AdopterDoc,
  ErrorKind,
  State,
  BuildClass,
  StopCause,
  EventKind,
  Outcome,
  Kind,
  StatusName,
  StopOutcome,
  FollowStream,
  ForgetAction,
  Found,
  OwnerLink,
  OwnerState,
  KindUnreadable,
  LeftDoc,
  ReadyMode,
  ReadyState,
  RecoverAction,
  Reply,
  SpawnStep,
  StallSignal,
  ResultDoc,
  ResultReason,
  StopDoc,
  StopDoc1,
  StopOutcomeDoc,
  StopFailed,
  ReservationSource,
  RetentionAction,
  RunScope,
  ScopeKind,
  ServiceLoss,
  StrayAction,
  StrayReasonDoc,
  TopSource,
  Via,
  WaitUntil,
  Definitions,
  InitAdopterDoc,
  SubreaperAdopterDoc,
  EndedGuardianAdopterDoc,
  ApiError,
  ArtifactDoc,
  ArtifactsDoc,
  AssessmentDoc,
  BuildProvenance,
  BuildsDoc,
  CgroupDoc,
  CgroupUsageDoc,
  EventDoc,
  EventsEndDoc,
  ForgetDoc,
  ForgetEntryDoc,
  GuardianBuildDoc,
  GuardianOfDoc,
  HolderDoc,
  OwnerDoc,
  IncidentDoc,
  LiveWorkloadLeftDoc,
  ResidueSurvivedLeftDoc,
  NotOrphanLeftDoc,
  GuardianLeftDoc,
  GuardianBelowLeftDoc,
  SurvivedLeftDoc,
  LimitPlacementDoc,
  LimitUsageDoc,
  LimitsDoc,
  ProcessDoc,
  ProofDoc,
  ReadinessDoc,
  ReceiptDoc,
  WitnessDoc,
  UsageDoc,
  RecordDoc,
  BuildsDoc1,
  WorkloadDoc,
  RecoverEntryDoc,
  LaunchedReply,
  SpawnFailedReply,
  ListReply,
  ScopeView,
  StallIncident,
  ShowReply,
  ShowDoc,
  ResultDocFields,
  ResidueStopDoc,
  ErrorResultDoc,
  WatchDoc,
  StopReply,
  StopDocFields,
  StopTimingsDoc,
  ErrorStopDoc,
  WaitReply,
  WaitDoc,
  WaitScope,
  SignalledReply,
  InputReply,
  OutputReply,
  FollowedReply,
  EventReply,
  EventsEndReply,
  RetentionEntryDoc,
  SampleDoc,
  ScopeStopDoc,
  StrayDoc,
  NoRecordStrayReasonDoc,
  TemporaryStrayReasonDoc,
  YoungStrayReasonDoc,
  LockedStrayReasonDoc,
  FailedStrayReasonDoc,
  EndedScopeCgroupStrayReasonDoc,
  UnnamedCgroupStrayReasonDoc,
  StreamDoc,
  TopScopeDoc,
} from "./defs.js";
export type {
  CapacityDoc,
} from "./capacity.js";
export type {
  GcDoc,
} from "./gc.js";
export type {
  HoldersDoc,
} from "./holders.js";
export type {
  LaunchedDoc,
} from "./launched.js";
export type {
  PsDoc,
} from "./ps.js";
export type {
  ReapDoc,
} from "./reap.js";
export type {
  ReceiptVerdictDoc,
} from "./receipt.js";
export type {
  RecoverDoc,
} from "./recover.js";
export type {
  Request,
  LaunchRequest,
  ListRequest,
  ShowRequest,
  StopRequest,
  WaitRequest,
  SignalRequest,
  InputRequest,
  FollowRequest,
  EventsRequest,
} from "./request.js";
export type {
  Response,
} from "./response.js";
export type {
  RunDoc,
} from "./run.js";
export type {
  DetachedSpawnFailedDoc,
} from "./spawn-failed.js";
export type {
  TopDoc,
} from "./top.js";
export type {
  VersionDoc,
} from "./version.js";
