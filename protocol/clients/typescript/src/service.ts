/**
 * The mode through the service's socket (`refine-supervisor serve`). Three kinds of connection:
 *
 * - the **anchor** carries the launches without `keep`, each sent with
 *   `"end_with_connection": true`: the service stops such a scope (its whole tree) when the
 *   connection it was launched on ends, so the anchor stays open for as long as this client is
 *   open, and closing the client, or this process dying, ends them;
 * - a **shared** connection takes the short requests (`list`, `show`, `signal`, a kept launch),
 *   answered in order;
 * - a **dedicated** connection per request that may take long (`wait`, `stop`, `input`,
 *   `follow`, `events`), so that one long request never holds up another; it is closed after
 *   its reply, and closing it is how an `AbortSignal` abandons the request.
 *
 * # Caveats
 * - The service closes a connection idle for 5 s unless a live scope is bound to it: a
 *   connection idle for 3 s is replaced rather than raced. An anchor that carried bound
 *   launches is then left open beside the new one (its scopes end with it), until the service
 *   closes it (they have ended) or this client does.
 * - A launch whose connection closes before its reply may or may not have happened: it is not
 *   retried (it fails with `ConnectionError`).
 */
import { join } from "node:path";
import { Connection } from "./connection.js";
import { abortReason, RefineError, SpawnFailed } from "./errors.js";
import type { ScopeView, ShowDoc, StopDoc } from "./generated/index.js";
import {
  Channel,
  EventStream,
  Follow,
  type Arg,
  type EventsOptions,
  type FollowOptions,
  type LaunchOptions,
  type RefineEvent,
  type Scope,
  type ScopeResult,
  type StopOptions,
  type WaitOptions,
  type WaitResult,
} from "./types.js";
import { ms, text } from "./wire.js";

export const DEFAULT_PORT = 7411;
/** Replace a connection idle this long: the service closes one idle for 5 s. */
const STALE_MS = 3000;

export interface SocketOptions {
  /** The socket's path; default `$REFINE_SOCKET`, or the one of `home` and `port`. */
  path?: string;
  /** The service's home (default `$REFINE_HOME`): its socket is `HOME/run/PORT/supervisor.sock`. */
  home?: string;
  /** The runtime port (default 7411). */
  port?: number;
}

/**
 * The service's socket: `path`; else `$REFINE_SOCKET` when no home is given; else
 * `HOME/run/PORT/supervisor.sock` with `home` (or `$REFINE_HOME`) and `port` (or 7411).
 */
export function socketPath(options: SocketOptions = {}, env: NodeJS.ProcessEnv = process.env): string {
  if (options.path) return options.path;
  if (env.REFINE_SOCKET && options.home === undefined) return env.REFINE_SOCKET;
  const home = options.home ?? env.REFINE_HOME;
  if (!home) throw new Error("no socket given: pass path or home, or set REFINE_SOCKET or REFINE_HOME");
  return join(home, "run", String(options.port ?? DEFAULT_PORT), "supervisor.sock");
}

/** The fields of a `launch` request, as the schema's `LaunchRequest` names them. */
export function launchFields(argv: readonly Arg[], o: LaunchOptions): Record<string, unknown> {
  if (!argv.length) throw new TypeError("argv is empty");
  return {
    argv: argv.map((a) => text(a, "argument")),
    env: o.env && Object.keys(o.env).length ? { ...o.env } : undefined,
    cwd: o.cwd ?? process.cwd(),
    label: o.label || undefined,
    kind: o.kind,
    meta: o.meta && Object.keys(o.meta).length ? { ...o.meta } : undefined,
    timeout_ms: ms(o.timeout, "timeout"),
    idle_timeout_ms: ms(o.idleTimeout, "idleTimeout"),
    kill_after_ms: ms(o.killAfter, "killAfter"),
    unique: o.unique || undefined,
    input: o.input || undefined,
    user: o.user,
    pty: o.pty || undefined,
    log_cap_bytes: o.logCap,
    memory_max_bytes: o.memoryMax,
    cpu_millis: o.cpus === undefined ? undefined : Math.round(o.cpus * 1000),
    pids_max: o.pidsMax,
    ready: o.ready,
    ready_timeout_ms: o.readyTimeout,
    health_cmd: o.healthCmd,
    health_interval_ms: o.healthInterval,
    health_timeout_ms: o.healthTimeout,
    health_retries: o.healthRetries,
    health_start_period_ms: o.healthStartPeriod,
    protect: o.protect,
    sandbox:
      o.sandbox === undefined && o.network === undefined && !o.sandboxPaths?.length
        ? undefined
        : {
            mode: (o.sandbox ?? "none").replace("-", "_"),
            paths: o.sandboxPaths?.length ? [...o.sandboxPaths] : undefined,
            network: o.network,
          },
    end_with_connection: o.keep ? undefined : true,
  };
}

export class ServiceBackend {
  readonly mode = "service" as const;
  readonly path: string;
  private anchor: Promise<Connection> | null = null;
  private anchorBound = false;
  private shared: Promise<Connection> | null = null;
  private readonly dedicated = new Set<Connection>();
  /** Earlier anchors that may still hold bound scopes. */
  private readonly retired = new Set<Connection>();
  private closed = false;

  private constructor(path: string) {
    this.path = path;
  }

  /** Connects (the shared connection first: a socket that does not answer fails here). */
  static async connect(options: SocketOptions = {}): Promise<ServiceBackend> {
    const b = new ServiceBackend(socketPath(options));
    await b.sharedConnection();
    return b;
  }

  private fresh(slot: "anchor" | "shared"): Promise<Connection> {
    const p = Connection.open(this.path);
    p.catch(() => {
      if (this[slot] === p) this[slot] = null;
    });
    this[slot] = p;
    return p;
  }

  private async sharedConnection(): Promise<Connection> {
    this.checkOpen();
    if (this.shared) {
      const c = await this.shared;
      if (!c.closed && c.idleFor() < STALE_MS) return c;
      c.close();
    }
    return this.fresh("shared");
  }

  private async anchorConnection(): Promise<Connection> {
    this.checkOpen();
    if (this.anchor) {
      const c = await this.anchor.catch(() => null);
      if (c && !c.closed && c.idleFor() < STALE_MS) return c;
      // Idle for a while: the service may be about to close it (it keeps a connection past its
      // idle timeout only while a scope bound to it lives). One that carried bound launches is
      // left open (closing it would end them) and a fresh anchor takes the next launch.
      if (c && !c.closed && this.anchorBound) {
        this.retired.add(c);
        c.whenClosed().then(() => this.retired.delete(c));
      } else c?.close();
    }
    this.anchorBound = false;
    return this.fresh("anchor");
  }

  /** One request on a connection of its own, closed after the reply or when `signal` aborts. */
  async once(op: string, fields: Record<string, unknown>, signal?: AbortSignal): Promise<Record<string, any>> {
    this.checkOpen();
    signal?.throwIfAborted();
    const c = await Connection.open(this.path);
    this.dedicated.add(c);
    const abort = () => c.close(abortReason(signal as AbortSignal) as Error);
    signal?.addEventListener("abort", abort, { once: true });
    try {
      signal?.throwIfAborted(); // aborted while connecting
      return await c.request(op, fields);
    } finally {
      signal?.removeEventListener("abort", abort);
      this.dedicated.delete(c);
      c.close();
    }
  }

  /** A streaming request on a connection of its own, fed into `channel`. */
  streamInto<T>(
    op: string,
    fields: Record<string, unknown>,
    channel: Channel<T>,
    take: (result: Record<string, any>) => boolean,
    signal?: AbortSignal,
  ): void {
    const run = async () => {
      this.checkOpen();
      signal?.throwIfAborted();
      const c = await Connection.open(this.path);
      this.dedicated.add(c);
      channel.onPause = () => c.pause();
      channel.onResume = () => c.resume();
      channel.onCancel = () => c.close();
      const abort = () => c.close(abortReason(signal as AbortSignal) as Error);
      signal?.addEventListener("abort", abort, { once: true });
      try {
        signal?.throwIfAborted(); // aborted while connecting
        await c.stream(op, fields, take);
      } finally {
        signal?.removeEventListener("abort", abort);
        this.dedicated.delete(c);
        c.close();
      }
    };
    run().then(
      () => channel.finish(),
      (e) => channel.fail(e),
    );
  }

  async request(op: string, fields: Record<string, unknown>): Promise<Record<string, any>> {
    return (await this.sharedConnection()).request(op, fields);
  }

  async launch(argv: readonly Arg[], options: LaunchOptions): Promise<Scope> {
    const fields = launchFields(argv, options);
    let result: Record<string, any>;
    if (options.keep) {
      result = await this.request("launch", fields);
    } else {
      const c = await this.anchorConnection();
      this.anchorBound = true;
      try {
        result = await c.request("launch", fields);
      } catch (e) {
        if (e instanceof RefineError && e.kind === "bad_request" && /end_with_connection/.test(e.message)) {
          throw new RefineError(
            "unsupported",
            "this service cannot bind a scope to its connection (no `end_with_connection`): " +
              "pass keep: true for work meant to outlive this process, or upgrade the service",
            { cause: e },
          );
        }
        throw e;
      }
    }
    if (result.spawn_failed) {
      const f = result.spawn_failed;
      throw new SpawnFailed(f.id, f.errno, f.step ?? null);
    }
    return new ServiceScope(this, result.launched.id, !!options.keep, !!options.input);
  }

  async adopt(id: string): Promise<Scope> {
    const shown = await this.show(id);
    return new ServiceScope(this, shown.id, null, null);
  }

  async list(all = false): Promise<ScopeView[]> {
    return (await this.request("list", { all: all || undefined })).list;
  }

  async show(id: string): Promise<ShowDoc> {
    return (await this.request("show", { id })).show;
  }

  events(options: EventsOptions = {}): EventStream {
    const stream = new EventStream();
    stream.cursor = options.since ?? null;
    const fields = {
      since: options.since,
      since_unix_ms: options.sinceUnixMs,
      until_unix_ms: options.untilUnixMs,
      kinds: options.kinds?.length ? options.kinds : undefined,
      scope: options.scope,
      follow: options.follow || undefined,
    };
    this.streamInto(
      "events",
      fields,
      stream,
      (result) => {
        if (result.event) {
          stream.cursor = result.event.cursor ?? stream.cursor;
          stream.push(result.event as RefineEvent);
          return false;
        }
        if (result.events_end) {
          stream.cursor = result.events_end.cursor ?? stream.cursor;
          return true;
        }
        throw new RefineError("bad_reply", `an events reply with neither event nor events_end: ${JSON.stringify(result)}`);
      },
      options.signal,
    );
    return stream;
  }

  /** Closes every connection: the anchor's end makes the service stop the scopes bound to it. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const conns: Connection[] = [...this.dedicated, ...this.retired];
    for (const p of [this.anchor, this.shared]) {
      const c = await p?.catch(() => null);
      if (c) conns.push(c);
    }
    for (const c of conns) c.close();
    await Promise.all(conns.map((c) => c.whenClosed()));
  }

  private checkOpen(): void {
    if (this.closed) throw new RefineError("connection", "this client is closed");
  }
}

function waited(result: Record<string, any>): WaitResult {
  const doc = result.wait;
  const s = doc.scopes[0];
  return { id: s.id, state: s.state, exitCode: s.exit_code ?? null, timedOut: !!doc.timed_out };
}

class ServiceScope implements Scope {
  readonly mode = "service" as const;
  constructor(
    private readonly svc: ServiceBackend,
    readonly id: string,
    readonly keep: boolean | null,
    private readonly inputOpen: boolean | null,
  ) {}

  async wait(options: WaitOptions = {}): Promise<WaitResult> {
    return waited(await this.svc.once("wait", { id: this.id, timeout_ms: ms(options.timeout, "timeout") }, options.signal));
  }

  async stop(options: StopOptions = {}): Promise<StopDoc> {
    const signal = options.killSignal === undefined ? undefined : String(options.killSignal).replace(/^SIG/i, "");
    return (await this.svc.once("stop", { id: this.id, grace_ms: ms(options.grace, "grace"), signal })).stop;
  }

  async signal(signal: string | number): Promise<boolean> {
    const name = String(signal).replace(/^SIG/i, "");
    return (await this.svc.request("signal", { id: this.id, signal: name })).signalled.delivered;
  }

  async input(data: string | Uint8Array, options: { close?: boolean } = {}): Promise<number> {
    const result = await this.svc.once("input", { id: this.id, data: text(data, "input"), close: options.close || undefined });
    return result.input.written;
  }

  async closeInput(): Promise<void> {
    await this.svc.once("input", { id: this.id, close: true });
  }

  follow(options: FollowOptions = {}): Follow {
    const follow = new Follow();
    const stream = options.stream ?? "stdout";
    this.svc.streamInto(
      "follow",
      { id: this.id, stream, from_offset: options.fromOffset, from_unix_ms: options.fromUnixMs },
      follow,
      (result) => {
        if (result.output) {
          follow.push(Buffer.from(result.output.data_b64, "base64"));
          return false;
        }
        if (result.followed) {
          const f = result.followed;
          follow.end = { stream: f.stream, endOffset: f.end_offset, complete: f.complete };
          return true;
        }
        throw new RefineError("bad_reply", `a follow reply with neither output nor followed: ${JSON.stringify(result)}`);
      },
      options.signal,
    );
    return follow;
  }

  show(): Promise<ShowDoc> {
    return this.svc.show(this.id);
  }

  async result(options: { signal?: AbortSignal } = {}): Promise<ScopeResult> {
    const w = await this.wait({ signal: options.signal });
    const show = await this.show();
    return { ...w, result: show.result, receipt: show.receipt ?? null, show };
  }

  /** Whether this client opened the scope's stdin (`null`: adopted, not known). */
  get hasInput(): boolean | null {
    return this.inputOpen;
  }
}
