/**
 * refine-supervisor-client: launch, wait for, follow, signal and stop refine-supervisor scopes
 * from Node, through the service's socket or without a service. See README.md.
 */
export { Refine, type OpenOptions } from "./client.js";
export { ServiceBackend, socketPath, DEFAULT_PORT, type SocketOptions } from "./service.js";
export { DirectBackend, type DirectOptions } from "./direct.js";
export { findSupervisor } from "./binaries.js";
export { RefineError, NotFound, ConnectionError, SpawnFailed, type ClientErrorKind } from "./errors.js";
export { API_VERSION } from "./wire.js";
export {
  Channel,
  Follow,
  EventStream,
  type Arg,
  type EventsOptions,
  type FollowEnd,
  type FollowOptions,
  type LaunchOptions,
  type Mode,
  type RefineEvent,
  type Scope,
  type ScopeResult,
  type StopOptions,
  type WaitOptions,
  type WaitResult,
} from "./types.js";
export type * from "./generated/index.js";
