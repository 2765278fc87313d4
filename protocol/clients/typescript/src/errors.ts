/**
 * The errors this client throws. A refusal by the service (or by `refine-supervisor` in the
 * service-less mode) is a `RefineError` with the service's `kind`; `NotFound` is its `not_found`.
 * The client's own kinds sit beside the service's closed enum: `connection` (the socket closed
 * or broke), `bad_reply` (a reply this client cannot read), `unsupported` (an operation the
 * mode cannot do), `spawn_failed` (the registration was made, the workload never ran).
 */
import type { ErrorKind } from "./generated/index.js";

export type ClientErrorKind = "connection" | "bad_reply" | "unsupported" | "spawn_failed";

export class RefineError extends Error {
  readonly kind: ErrorKind | ClientErrorKind;
  constructor(kind: ErrorKind | ClientErrorKind, message: string, options?: { cause?: unknown }) {
    super(`${kind}: ${message}`, options);
    this.name = "RefineError";
    this.kind = kind;
  }
}

/** No scope has that id, prefix or label. */
export class NotFound extends RefineError {
  constructor(message: string) {
    super("not_found", message);
    this.name = "NotFound";
  }
}

/** The connection to the service closed or broke before the reply was whole. */
export class ConnectionError extends RefineError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("connection", message, options);
    this.name = "ConnectionError";
  }
}

/**
 * The registration was made but the workload never ran: `errno` says why (2: no such program,
 * 13: not executable), `step` which step failed (`program`, `cwd`, `user`) when the service said.
 */
export class SpawnFailed extends RefineError {
  readonly id: string;
  readonly errno: number;
  readonly step: string | null;
  constructor(id: string, errno: number, step: string | null) {
    super("spawn_failed", `scope ${id} never ran: errno ${errno}${step ? ` at ${step}` : ""}`);
    this.name = "SpawnFailed";
    this.id = id;
    this.errno = errno;
    this.step = step;
  }
}

/** A refusal from a reply's `error` object. */
export function refusal(kind: string | undefined, message: string | undefined): RefineError {
  const k = (kind ?? "internal") as ErrorKind;
  return k === "not_found" ? new NotFound(message ?? "") : new RefineError(k, message ?? "");
}

/** The rejection an aborted operation settles with: the signal's reason, as Node's own APIs do. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}
