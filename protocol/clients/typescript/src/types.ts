/**
 * The client's own face: what a caller passes (options in milliseconds and bytes, camelCase)
 * and the handle of one scope. The documents themselves are the generated types
 * (`src/generated/`, from `protocol/schema/`), passed through as the service wrote them.
 */
import type { EventDoc, EventKind, Kind, ReceiptDoc, ShowDoc, State, StopDoc } from "./generated/index.js";

export type Mode = "service" | "direct";

/** An argument: text, or bytes (UTF-8 only through the socket; any bytes without a service). */
export type Arg = string | Uint8Array;

export interface LaunchOptions {
  /** Variables set for the workload (as `run --env`). */
  env?: Record<string, string>;
  /** The workload's working directory; default: this process's (`process.cwd()`), not the service's. */
  cwd?: string;
  kind?: Kind;
  label?: string;
  /** Purpose metadata, as `run --meta`. */
  meta?: Record<string, string>;
  /** Completion deadline, milliseconds from the start (SIGTERM, then the stop `killAfter` later). */
  timeout?: number;
  /** Idle deadline, milliseconds without output, input or signals. */
  idleTimeout?: number;
  /** A deadline's grace before the kill, milliseconds (`timeout -k`). */
  killAfter?: number;
  /** Refuse (`label_held`) while another open scope holds this label. */
  unique?: boolean;
  /** Give the workload a stdin this client feeds with `input()`; otherwise it reads /dev/null. */
  input?: boolean;
  /** Run the workload as USER[:GROUP] (root only). */
  user?: string;
  /** Run the workload on a pseudo-terminal. */
  pty?: boolean;
  /** Byte cap of each output artifact (0: none; default 1 GiB). */
  logCap?: number;
  /** The whole tree's memory limit, bytes (`run --memory-max`; an OOM kill is the result's reason `oom`). */
  memoryMax?: number;
  /** The tree's CPU bandwidth in cores (`run --cpus`, e.g. 0.5). */
  cpus?: number;
  /** The most processes and threads the tree holds at once (`run --pids-max`). */
  pidsMax?: number;
  /** How the workload says it is ready (`run --ready`): `"notify"` (sd_notify) or `"cmd=COMMAND"`. */
  ready?: string;
  /** How long it has to be ready before its scope is stopped, milliseconds (default 90 s; 0: no bound). */
  readyTimeout?: number;
  /** H7: a health probe (`run --health-cmd`, docker's HEALTHCHECK): reported, never acted on. */
  healthCmd?: string;
  /** Between probes, milliseconds (default 30 s). */
  healthInterval?: number;
  /** A probe running longer is stopped and fails, milliseconds (default 30 s). */
  healthTimeout?: number;
  /** Failures in a row that make it unhealthy (default 3). */
  healthRetries?: number;
  /** From the start, failures do not count, milliseconds (default 0). */
  healthStartPeriod?: number;
  /**
   * What the workload's Landlock domain takes away (`run --protect`, SPEC X11): `"all"` (the
   * default), `"fs"`, `"signals"` or `"none"`.
   */
  protect?: "all" | "fs" | "signals" | "none";
  /**
   * A sandbox (`run --sandbox`, SPEC X12): `"read-only"` (writes only to a private TMPDIR and
   * the null-like devices), `"workspace-write"` (also the working directory and `sandboxPaths`)
   * or `"none"` (the default). A kernel that cannot hold it refuses the launch.
   */
  sandbox?: "read-only" | "workspace-write" | "none";
  /** More writable paths of a `"workspace-write"` sandbox (relative: to the working directory). */
  sandboxPaths?: readonly string[];
  /** `"none"`: no TCP bind or connect (`run --network none`, SPEC X12). */
  network?: "none" | "all";
  /**
   * `false` (the default): the scope does not outlive this process. Through the socket it is
   * bound to this client's connection (`end_with_connection`), so the service stops it when the
   * client closes or this process dies; without a service its `run` dies with this process
   * (`--end-with-parent`). `true`: work meant to outlive this process (adopt it later by id).
   */
  keep?: boolean;
  /** Without a service: `run --stop-grace`, how long a SIGTERM'd `run` lets the workload end by itself (ms; default 10 s). */
  stopGrace?: number;
}

export interface WaitOptions {
  /** Give up after this many milliseconds: `timedOut` is then true and the scope is left alone. */
  timeout?: number;
  /** Abandon the wait (the promise rejects with the signal's reason); the scope is left alone. */
  signal?: AbortSignal;
}

export interface WaitResult {
  id: string;
  /** `exited` or `unverified` once it ended; `live` when the wait timed out first. */
  state: State;
  /** The code `run` exits with: the workload's, 128+N for signal N, 124/137 for deadlines, 127 never started. */
  exitCode: number | null;
  timedOut: boolean;
}

export interface StopOptions {
  /** Milliseconds for the workload to end by itself after the polite signal; absent: kill at once. */
  grace?: number;
  /** The polite signal of `grace` (`"TERM"`, `"SIGINT"`, 1, ...); default TERM. */
  killSignal?: string | number;
}

export interface FollowOptions {
  stream?: "stdout" | "stderr";
  /** Start at this byte offset of the stream. */
  fromOffset?: number;
  /** Start at the first batch written at or after this Unix time (ms); needs a guardian's time index. */
  fromUnixMs?: number;
  signal?: AbortSignal;
}

/** How a follow ended: the stream's end offset and whether the capture has every byte. */
export interface FollowEnd {
  stream: "stdout" | "stderr";
  endOffset: number;
  /** `false` when the capture missed bytes (a cap, a failed write); `null` when not known (no service, adopted). */
  complete: boolean | null;
}

export interface EventsOptions {
  /** Only events after this cursor (an event's `cursor`, or a finished stream's `cursor`). */
  since?: string;
  /** Only events at or after this Unix time (ms). */
  sinceUnixMs?: number;
  /** Only events before this Unix time (ms); with `follow`, the stream ends then. */
  untilUnixMs?: number;
  /** Only these kinds (absent: all). */
  kinds?: EventKind[];
  /** Only this scope's (an id, a 4+ hex prefix, or a label). */
  scope?: string;
  /** Keep the stream open for new events (it then runs until `untilUnixMs`, an abort or a `break`). */
  follow?: boolean;
  signal?: AbortSignal;
}

/** One event of the journal (schema `event`): a scope's change, with the cursor to resume after. */
export type RefineEvent = EventDoc;

/** A finished scope: how it ended, its result record and the receipt that proves it. */
export interface ScopeResult extends WaitResult {
  result: ShowDoc["result"];
  receipt: ReceiptDoc | null;
  show: ShowDoc;
}

/** One scope: launched by this client or adopted by id. */
export interface Scope {
  readonly id: string;
  readonly mode: Mode;
  /** `true`/`false` as launched; `null` for an adopted scope. */
  readonly keep: boolean | null;
  wait(options?: WaitOptions): Promise<WaitResult>;
  /** Ends the whole tree; with `grace`, the polite signal first. The `stop --json` document. */
  stop(options?: StopOptions): Promise<StopDoc>;
  /** Sends a signal to the workload (through the socket: its process group); false when nothing took it. */
  signal(signal: string | number): Promise<boolean>;
  /** Writes to the workload's stdin (a launch with `input: true`); returns the bytes written. */
  input(data: string | Uint8Array, options?: { close?: boolean }): Promise<number>;
  /** Closes the workload's stdin (its end of file). */
  closeInput(): Promise<void>;
  /** The stream's bytes as they are written, until the scope has ended and its output is all captured. */
  follow(options?: FollowOptions): Follow;
  show(): Promise<ShowDoc>;
  /** Waits for the end, then the result and the receipt (`show`'s document). */
  result(options?: { signal?: AbortSignal }): Promise<ScopeResult>;
}

/**
 * An async queue between a producer (socket replies, a child's pipe) and a `for await` loop:
 * the producer is paused while the consumer is behind, and a loop left early (`break`) cancels
 * the producer.
 */
export class Channel<T> implements AsyncIterableIterator<T> {
  private readonly items: T[] = [];
  private readonly waiting: Array<{ resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void }> = [];
  private finished = false;
  private error: unknown = null;
  private paused = false;
  /** Set by the producer: stop and resume reading, give up. */
  onPause: () => void = () => {};
  onResume: () => void = () => {};
  onCancel: () => void = () => {};

  static readonly HIGH = 64;

  push(item: T): void {
    if (this.finished) return;
    const w = this.waiting.shift();
    if (w) return w.resolve({ value: item, done: false });
    this.items.push(item);
    if (!this.paused && this.items.length >= Channel.HIGH) {
      this.paused = true;
      this.onPause();
    }
  }

  finish(): void {
    if (this.finished) return;
    this.finished = true;
    for (const w of this.waiting.splice(0)) w.resolve({ value: undefined, done: true });
  }

  fail(err: unknown): void {
    if (this.finished) return;
    this.error = err;
    this.finished = true;
    for (const w of this.waiting.splice(0)) w.reject(err);
  }

  next(): Promise<IteratorResult<T>> {
    if (this.items.length) {
      const value = this.items.shift() as T;
      if (this.paused && this.items.length < Channel.HIGH / 2) {
        this.paused = false;
        this.onResume();
      }
      return Promise.resolve({ value, done: false });
    }
    if (this.error !== null) {
      const err = this.error;
      return Promise.reject(err);
    }
    if (this.finished) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  return(): Promise<IteratorResult<T>> {
    if (!this.finished) {
      this.finished = true;
      this.items.length = 0;
      this.onCancel();
    }
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

/** A follow: iterate it for the chunks (`Buffer`s); `end` is set once the stream ended. */
export class Follow extends Channel<Buffer> {
  end: FollowEnd | null = null;
  /** Every chunk until the end, concatenated. */
  async bytes(): Promise<Buffer> {
    const parts: Buffer[] = [];
    for await (const chunk of this) parts.push(chunk);
    return Buffer.concat(parts);
  }
}

/**
 * The `events` stream: iterate it for the events. `cursor` is where to resume (`since`): the
 * last event's taken so far, and at the end of a stream without `follow` the journal's.
 */
export class EventStream extends Channel<RefineEvent> {
  cursor: string | null = null;
}
