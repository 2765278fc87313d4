/**
 * The mode without a service: each launch is a `refine-supervisor run --json [flags] -- CMD...`
 * child of this process, which holds the scope in the foreground (its guardian, its capture)
 * and prints the `run --json` document when it has ended. The other operations are the CLI's,
 * which read the same `run/P` (`ps --json`, `show --json`, `stop --json`, `wait --json`,
 * `logs -f`); none needs a service.
 *
 * - **The id.** `run --json` prints its document only at the end, so a launch learns its id
 *   from `ps --json`: the row whose guardian is a child of this `run` (`/proc/PID/stat`'s
 *   parent), polled until it shows up or `run` has ended (its document then has the id).
 * - **keep.** Without `keep`, `run --end-with-parent` makes `run` die with this process
 *   (`PR_SET_PDEATHSIG`), and with it its scope is stopped. With `keep` (`run --detach` needs a
 *   service), `run` starts in a session of its own (`detached`), its document goes to a file
 *   rather than a pipe, and nothing of it holds this process: it outlives it; adopt it by id.
 * - **wait** is `run`'s exit and its document (its exit status is the code `wait` reports);
 *   **stop** is `stop --json [-t GRACE] ID`, the one stop, while `run` sees its workload end;
 *   **signal** is sent to `run`, which forwards it to the workload (SIGINT/SIGTERM also start
 *   its `--stop-grace`); **input** is `run`'s stdin, which it passes to the workload.
 *
 * # Caveats
 * - A spawn failure found before `ps` shows the scope is `SpawnFailed`; one found after is a
 *   scope whose `wait` reports 127 or 126.
 * - An adopted scope has no `run` of this process behind it: `signal` and `input` need the
 *   service (they would need its pidfd or its stdin) and are `unsupported`.
 * - `events` reads the journal through `refine-supervisor events --json`; the end of a
 *   stream without `follow` carries no cursor of its own (`cursor` is the last event's).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findSupervisor } from "./binaries.js";
import { abortReason, NotFound, RefineError, SpawnFailed, type ClientErrorKind } from "./errors.js";
import type { ErrorKind, PsDoc, RunDoc, ScopeView, ShowDoc, StopDoc, WaitDoc } from "./generated/index.js";
import {
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
import { ms } from "./wire.js";

export interface DirectOptions {
  /** The `refine-supervisor` to run (default: `$REFINE_BIN`, beside this package, or on PATH). */
  bin?: string;
  /** The product home (default `$REFINE_HOME`, else the binary's own default). */
  home?: string;
  port?: number;
}

/** How long a launch waits for its scope to show up in `ps` (a loaded machine can be slow). */
const DISCOVER_MS = 60_000;

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
}

/** Handles that may hold Node's event loop: held only while an operation waits on them. */
class Hold {
  private count = 0;
  constructor(private readonly handles: Array<{ ref(): unknown; unref(): unknown } | null | undefined>) {
    for (const h of handles) h?.unref();
  }
  acquire(): () => void {
    if (this.count++ === 0) for (const h of this.handles) h?.ref();
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.count === 0) for (const h of this.handles) h?.unref();
    };
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

function isUtf8(bytes: Uint8Array): boolean {
  try {
    utf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/** `sh` text that is exactly these bytes as one word (printf's octal escapes; no NUL in argv). */
function shellBytes(bytes: Uint8Array, name: string): string {
  if (bytes.includes(0)) throw new TypeError("an argument holds a NUL byte");
  const octal = [...bytes].map((b) => "\\" + b.toString(8).padStart(3, "0")).join("");
  return `${name}=$(printf '${octal}x'); ${name}=\${${name}%x}; `;
}

/** The parent of `pid` (the 4th field of /proc/PID/stat, after the parenthesised name), or null. */
function parentOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return null;
  }
}

function duration(value: number | undefined, name: string): string | undefined {
  const v = ms(value, name);
  return v === undefined ? undefined : `${v}ms`;
}

function signalName(signal: string | number): string | number {
  if (typeof signal === "number") return signal;
  const s = signal.toUpperCase();
  return /^\d+$/.test(s) ? Number(s) : s.startsWith("SIG") ? s : `SIG${s}`;
}

export class DirectBackend {
  readonly mode = "direct" as const;
  readonly bin: string;
  readonly global: string[];
  private readonly children = new Set<DirectScope>();
  private endWithParent: Promise<boolean> | null = null;

  constructor(options: DirectOptions = {}) {
    this.bin = findSupervisor(options.bin);
    const home = options.home ?? process.env.REFINE_HOME;
    this.global = [...(home ? ["--home", home] : []), ...(options.port !== undefined ? ["--port", String(options.port)] : [])];
  }

  /** Runs `refine-supervisor ARGS` to its end, stdin /dev/null; `signal` kills it. */
  cli(args: string[], signal?: AbortSignal): Promise<Ran> {
    return new Promise((resolve, reject) => {
      signal?.throwIfAborted();
      const child = spawn(this.bin, [...this.global, ...args], { stdio: ["ignore", "pipe", "pipe"] });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on("data", (b: Buffer) => out.push(b));
      child.stderr.on("data", (b: Buffer) => err.push(b));
      const abort = () => {
        child.kill("SIGKILL");
        reject(abortReason(signal as AbortSignal));
      };
      signal?.addEventListener("abort", abort, { once: true });
      child.on("error", (e) => {
        signal?.removeEventListener("abort", abort);
        reject(e);
      });
      child.on("close", (code, sig) => {
        signal?.removeEventListener("abort", abort);
        resolve({ code, signal: sig, stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString("utf8").trim() });
      });
    });
  }

  /**
   * The JSON document a `--json` command printed (also when it exited non-zero, as `stop` and
   * `wait` do); without one, its failure as a `RefineError` of `kind`, or `NotFound` when `id`
   * matches no registration at all.
   */
  async document<T>(args: string[], kind: ErrorKind | ClientErrorKind, id?: string, signal?: AbortSignal): Promise<T> {
    const ran = await this.cli(args, signal);
    const out = ran.stdout.toString("utf8").trim();
    if (out) {
      try {
        return JSON.parse(out) as T;
      } catch {
        // Not a document: reported below with its stderr.
      }
    }
    if (id !== undefined && !(await this.matches(id))) throw new NotFound(`no scope ${JSON.stringify(id)}`);
    throw new RefineError(ran.code === 2 ? "bad_request" : kind, ran.stderr || `refine-supervisor ${args[0]} exited ${ran.code ?? ran.signal}`);
  }

  /** Whether `id` names a registration as the CLI takes it: the id, a prefix of 4+ hex digits, a label. */
  private async matches(id: string): Promise<boolean> {
    const ran = await this.cli(["ps", "--json", "--all"]);
    if (ran.code !== 0) return true; // cannot tell: let the command's own error stand
    const rows = (JSON.parse(ran.stdout.toString("utf8")) as PsDoc).registrations as ScopeView[];
    const prefix = id.length >= 4 && /^[0-9a-f]+$/.test(id);
    return rows.some((r) => r.id === id || (prefix && r.id.startsWith(id)) || r.label === id);
  }

  private supportsEndWithParent(): Promise<boolean> {
    this.endWithParent ??= this.cli(["run", "--help"]).then((r) => r.stdout.toString("utf8").includes("--end-with-parent"));
    return this.endWithParent;
  }

  async launch(argv: readonly Arg[], o: LaunchOptions): Promise<Scope> {
    if (!argv.length) throw new TypeError("argv is empty");
    if (!o.keep && !(await this.supportsEndWithParent())) {
      throw new RefineError(
        "unsupported",
        `${this.bin} has no \`run --end-with-parent\`: a launch without keep would outlive this process; ` +
          "pass keep: true for work meant to outlive it, or use a newer refine-supervisor",
      );
    }
    const flags: string[] = ["run", "--json"];
    const add = (flag: string, value: string | undefined) => {
      if (value !== undefined) flags.push(flag, value);
    };
    add("--label", o.label || undefined);
    add("--kind", o.kind);
    add("--cwd", o.cwd ?? process.cwd());
    for (const [k, v] of Object.entries(o.env ?? {})) add("--env", `${k}=${v}`);
    for (const [k, v] of Object.entries(o.meta ?? {})) add("--meta", `${k}=${v}`);
    add("--timeout", duration(o.timeout, "timeout"));
    add("--idle-timeout", duration(o.idleTimeout, "idleTimeout"));
    add("--kill-after", duration(o.killAfter, "killAfter"));
    add("--stop-grace", duration(o.stopGrace, "stopGrace"));
    add("--user", o.user);
    add("--log-cap", o.logCap === undefined ? undefined : String(o.logCap));
    add("--memory-max", o.memoryMax === undefined ? undefined : String(o.memoryMax));
    add("--cpus", o.cpus === undefined ? undefined : String(o.cpus));
    add("--pids-max", o.pidsMax === undefined ? undefined : String(o.pidsMax));
    add("--ready", o.ready);
    if (o.ready !== undefined) add("--ready-timeout", duration(o.readyTimeout, "readyTimeout"));
    add("--protect", o.protect);
    if (o.sandbox !== undefined) {
      const paths = (o.sandboxPaths ?? []).join(",");
      add("--sandbox", paths ? `${o.sandbox}=${paths}` : o.sandbox);
    }
    add("--network", o.network);
    add("--health-cmd", o.healthCmd);
    if (o.healthCmd !== undefined) {
      add("--health-interval", duration(o.healthInterval, "healthInterval"));
      add("--health-timeout", duration(o.healthTimeout, "healthTimeout"));
      add("--health-start-period", duration(o.healthStartPeriod, "healthStartPeriod"));
      add("--health-retries", o.healthRetries === undefined ? undefined : String(o.healthRetries));
    }
    if (o.unique) flags.push("--unique");
    if (o.pty) flags.push("--pty");
    if (!o.keep) flags.push("--end-with-parent");
    flags.push("--");

    // Arguments that are not UTF-8 cannot be a JavaScript string: sh rebuilds them and execs.
    let file = this.bin;
    let args = [...this.global, ...flags];
    const bytes = argv.map((a) => (typeof a === "string" ? Buffer.from(a, "utf8") : a));
    if (argv.some((a) => typeof a !== "string" && !isUtf8(a))) {
      const script = bytes.map((b, i) => shellBytes(b, `a${i}`)).join("");
      const words = bytes.map((_, i) => `"$a${i}"`).join(" ");
      args = ["-c", `${script}exec "$0" "$@" ${words}`, this.bin, ...args];
      file = "/bin/sh";
    } else {
      args.push(...bytes.map((b) => Buffer.from(b).toString("utf8")));
    }

    let files: { dir: string; out: string; err: string } | null = null;
    let stdio: any[];
    if (o.keep) {
      const dir = mkdtempSync(join(tmpdir(), "refine-run-"));
      files = { dir, out: join(dir, "run.json"), err: join(dir, "run.err") };
      stdio = [o.input ? "pipe" : "ignore", openSync(files.out, "w"), openSync(files.err, "w")];
    } else {
      stdio = [o.input ? "pipe" : "ignore", "pipe", "pipe"];
    }
    const child = spawn(file, args, { stdio, detached: !!o.keep });
    if (files) for (const fd of stdio.slice(1)) closeSync(fd as number);
    const scope = new DirectScope(this, child, !!o.keep, !!o.input, files);
    this.children.add(scope);
    scope.ended.finally(() => this.children.delete(scope));
    try {
      await scope.discover();
    } catch (e) {
      this.children.delete(scope);
      throw e;
    }
    return scope;
  }

  async adopt(id: string): Promise<Scope> {
    const shown = await this.show(id);
    return new DirectScope(this, null, null, false, null, shown.id);
  }

  async list(all = false): Promise<ScopeView[]> {
    const doc = await this.document<PsDoc>(["ps", "--json", ...(all ? ["--all"] : [])], "internal");
    return doc.registrations as ScopeView[];
  }

  show(id: string): Promise<ShowDoc> {
    return this.document<ShowDoc>(["show", "--json", id], "internal", id);
  }

  /**
   * `refine-supervisor events --json`: the journal is a file the CLI reads without a service.
   * A stream that ends (no `follow`) leaves `cursor` at its last event's (the CLI prints no end
   * cursor; resuming there reads the same later events).
   */
  events(options: EventsOptions = {}): EventStream {
    const stream = new EventStream();
    stream.cursor = options.since ?? null;
    const signal = options.signal;
    if (signal?.aborted) {
      stream.fail(abortReason(signal));
      return stream;
    }
    const args = ["events", "--json"];
    if (options.since !== undefined) args.push("--after", options.since);
    if (options.sinceUnixMs !== undefined) args.push("--since", new Date(options.sinceUnixMs).toISOString());
    if (options.untilUnixMs !== undefined) args.push("--until", new Date(options.untilUnixMs).toISOString());
    for (const kind of options.kinds ?? []) args.push("--filter", `kind=${kind}`);
    if (options.scope !== undefined) {
      args.push("--filter", /^[0-9a-f]{4,}$/.test(options.scope) ? `id=${options.scope}` : `label=${options.scope}`);
    }
    if (options.follow) args.push("--follow");
    const child = spawn(this.bin, [...this.global, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    const err: Buffer[] = [];
    let partial = "";
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      const lines = (partial + chunk).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) {
        if (!line.trim()) continue;
        try {
          const event = JSON.parse(line) as RefineEvent;
          stream.cursor = event.cursor ?? stream.cursor;
          stream.push(event);
        } catch {
          stream.fail(new RefineError("bad_reply", `an events line is not JSON: ${line.slice(0, 200)}`));
          child.kill("SIGKILL");
        }
      }
    });
    stream.onPause = () => child.stdout.pause();
    stream.onResume = () => child.stdout.resume();
    stream.onCancel = () => child.kill("SIGKILL");
    const abort = () => {
      child.kill("SIGKILL");
      stream.fail(abortReason(signal as AbortSignal));
    };
    signal?.addEventListener("abort", abort, { once: true });
    child.on("error", (e) => stream.fail(e));
    child.on("close", (code) => {
      signal?.removeEventListener("abort", abort);
      if (code === 0) stream.finish();
      else stream.fail(new RefineError(code === 2 ? "bad_request" : "internal", Buffer.concat(err).toString("utf8").trim() || `events exited ${code}`));
    });
    return stream;
  }

  /** Ends what this client launched without keep: SIGTERM to each `run` (its --stop-grace, then the stop). */
  async close(): Promise<void> {
    const open = [...this.children].filter((s) => s.keep === false);
    await Promise.all(
      open.map(async (s) => {
        const release = s.holdLoop();
        try {
          s.terminate();
          await s.ended;
        } finally {
          release();
        }
      }),
    );
  }
}

class DirectScope implements Scope {
  readonly mode = "direct" as const;
  private foundId: string | null;
  /** Settles when this client's `run` has exited: its status and document (null when adopted). */
  readonly ended: Promise<{ code: number | null; signal: NodeJS.Signals | null; doc: RunDoc | null; stderr: string }>;
  private readonly hold: Hold | null;

  constructor(
    private readonly backend: DirectBackend,
    private readonly child: ChildProcess | null,
    readonly keep: boolean | null,
    private readonly hasInput: boolean,
    files: { dir: string; out: string; err: string } | null,
    id: string | null = null,
  ) {
    this.foundId = id;
    if (!child) {
      this.hold = null;
      this.ended = Promise.resolve({ code: null, signal: null, doc: null, stderr: "" });
      return;
    }
    this.hold = new Hold([child, child.stdin as any, child.stdout as any, child.stderr as any]);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on("data", (b: Buffer) => out.push(b));
    child.stderr?.on("data", (b: Buffer) => err.push(b));
    child.stdin?.on("error", () => {}); // a workload that closed its stdin: the write reports it
    this.ended = new Promise((resolve) => {
      child.on("error", (e) => resolve({ code: null, signal: null, doc: null, stderr: String(e) }));
      child.on("close", (code, signal) => {
        let stdout = Buffer.concat(out);
        let stderr = Buffer.concat(err).toString("utf8");
        if (files) {
          try {
            stdout = readFileSync(files.out);
            stderr = readFileSync(files.err, "utf8");
          } catch {}
          rmSync(files.dir, { recursive: true, force: true });
        }
        let doc: RunDoc | null = null;
        try {
          doc = JSON.parse(stdout.toString("utf8")) as RunDoc;
        } catch {}
        resolve({ code, signal, doc, stderr: stderr.trim() });
      });
    });
  }

  get id(): string {
    if (this.foundId === null) throw new Error("the scope's id is not known yet");
    return this.foundId;
  }

  /** Finds the id: the `ps` row whose guardian is this `run`'s child, or `run`'s document. */
  async discover(): Promise<void> {
    const child = this.child as ChildProcess;
    const release = (this.hold as Hold).acquire();
    try {
      let exited = false;
      const ended = this.ended.then((e) => {
        exited = true;
        return e;
      });
      const deadline = Date.now() + DISCOVER_MS;
      for (let delay = 5; ; delay = Math.min(delay * 2, 100)) {
        if (exited) {
          const e = await ended;
          if (e.doc?.outcome === "spawn_failed") throw new SpawnFailed(e.doc.id, e.doc.errno ?? 0, null);
          if (e.doc) {
            this.foundId = e.doc.id;
            return;
          }
          throw new RefineError("launch_failed", e.stderr || `refine-supervisor run exited ${e.code ?? e.signal} without a document`);
        }
        const ps = await this.backend.cli(["ps", "--json"]);
        if (ps.code === 0 && child.pid !== undefined) {
          const rows = (JSON.parse(ps.stdout.toString("utf8")) as PsDoc).registrations as ScopeView[];
          // The oldest (ps lists the newest first; a tie goes to the later row): a launch with a
          // readiness probe also starts the probe's scopes from that run, each after its own.
          const row = rows
            .filter((r) => parentOf(r.guardian_pid) === child.pid)
            .reduce<ScopeView | undefined>((a, r) => (a && a.started_at_unix_ms < r.started_at_unix_ms ? a : r), undefined);
          if (row) {
            this.foundId = row.id;
            return;
          }
        }
        if (Date.now() > deadline) {
          this.terminate();
          throw new RefineError("launch_failed", `the scope of run ${child.pid} did not show up in ps within ${DISCOVER_MS} ms`);
        }
        await Promise.race([ended, new Promise((r) => setTimeout(r, delay))]);
      }
    } finally {
      release();
    }
  }

  /** Holds Node's event loop open on this scope's `run` until the returned function is called. */
  holdLoop(): () => void {
    return this.hold?.acquire() ?? (() => {});
  }

  /** SIGTERM to this client's `run`: it forwards it, and stops the scope after its --stop-grace. */
  terminate(): void {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGTERM");
  }

  private running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  async wait(options: WaitOptions = {}): Promise<WaitResult> {
    const timeout = ms(options.timeout, "timeout");
    const signal = options.signal;
    signal?.throwIfAborted();
    if (!this.child) return this.cliWait(timeout, signal);
    const release = (this.hold as Hold).acquire();
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      const timedOut = Symbol("timed out");
      const racers: Array<Promise<unknown>> = [this.ended];
      if (timeout !== undefined) racers.push(new Promise((r) => (timer = setTimeout(() => r(timedOut), timeout))));
      if (signal) racers.push(new Promise((_, reject) => signal.addEventListener("abort", (onAbort = () => reject(abortReason(signal))), { once: true })));
      const got = await Promise.race(racers);
      if (got === timedOut) return { id: this.id, state: "live", exitCode: null, timedOut: true };
      const e = got as Awaited<typeof this.ended>;
      if (e.doc && e.doc.scope === "exited" && e.code !== null) {
        return { id: this.id, state: "exited", exitCode: e.code, timedOut: false };
      }
      // `run` was killed, or could not prove the end: the registration says how it stands.
      return this.cliWait(undefined, signal);
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener("abort", onAbort);
      release();
    }
  }

  private async cliWait(timeout: number | undefined, signal?: AbortSignal): Promise<WaitResult> {
    const args = ["wait", "--json", ...(timeout !== undefined ? ["--timeout", `${timeout}ms`] : []), this.id];
    const doc = await this.backend.document<WaitDoc>(args, "internal", this.id, signal);
    const s = doc.scopes[0];
    return { id: s.id, state: s.state, exitCode: s.exit_code ?? null, timedOut: doc.timed_out };
  }

  stop(options: StopOptions = {}): Promise<StopDoc> {
    const args = ["stop", "--json"];
    const grace = ms(options.grace, "grace");
    if (grace !== undefined) args.push("--grace", `${grace}ms`);
    if (options.killSignal !== undefined) args.push("--signal", String(options.killSignal).replace(/^SIG/i, ""));
    return this.backend.document<StopDoc>([...args, this.id], "stop_failed", this.id);
  }

  async signal(signal: string | number): Promise<boolean> {
    if (!this.child) throw new RefineError("unsupported", "signalling an adopted scope needs the service (its pidfd-verified signal)");
    const sig = signalName(signal);
    if (sig === "SIGKILL" || sig === "SIGSTOP" || sig === 9 || sig === 19) {
      throw new RefineError("unsupported", `${String(signal)} cannot be forwarded by run: use stop()`);
    }
    if (!this.running()) return false;
    try {
      return this.child.kill(sig as NodeJS.Signals);
    } catch (e) {
      throw new RefineError("bad_request", `${String(signal)} is no signal: ${(e as Error).message}`);
    }
  }

  async input(data: string | Uint8Array, options: { close?: boolean } = {}): Promise<number> {
    const stdin = this.child?.stdin;
    if (!stdin || !this.hasInput) throw new RefineError("bad_request", `scope ${this.foundId} has no open input (launch it with input: true)`);
    if (stdin.writableEnded) throw new RefineError("bad_request", `scope ${this.foundId} has no open input (closed)`);
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data);
    const release = (this.hold as Hold).acquire();
    try {
      await new Promise<void>((resolve, reject) => stdin.write(bytes, (e) => (e ? reject(new RefineError("bad_request", `the workload's stdin: ${e.message}`)) : resolve())));
      if (options.close) await new Promise<void>((resolve) => stdin.end(resolve));
      return bytes.length;
    } finally {
      release();
    }
  }

  async closeInput(): Promise<void> {
    await this.input("", { close: true });
  }

  follow(options: FollowOptions = {}): Follow {
    const follow = new Follow();
    const stream = options.stream ?? "stdout";
    const skip = options.fromOffset ?? 0;
    const args = ["logs", "--follow", stream === "stderr" ? "--stderr" : "--stdout"];
    if (options.fromUnixMs !== undefined) args.push("--since", new Date(options.fromUnixMs).toISOString());
    const signal = options.signal;
    if (signal?.aborted) {
      follow.fail(abortReason(signal));
      return follow;
    }
    let offset = 0;
    const release = this.hold?.acquire() ?? (() => {});
    const child = spawn(this.backend.bin, [...this.backend.global, ...args, this.id], { stdio: ["ignore", "pipe", "pipe"] });
    const err: Buffer[] = [];
    child.stderr.on("data", (b: Buffer) => err.push(b));
    child.stdout.on("data", (b: Buffer) => {
      const start = Math.max(0, Math.min(b.length, skip - offset));
      offset += b.length;
      if (start < b.length) follow.push(b.subarray(start));
    });
    follow.onPause = () => child.stdout.pause();
    follow.onResume = () => child.stdout.resume();
    follow.onCancel = () => child.kill("SIGKILL");
    const abort = () => {
      child.kill("SIGKILL");
      follow.fail(abortReason(signal as AbortSignal));
    };
    signal?.addEventListener("abort", abort, { once: true });
    child.on("close", () => signal?.removeEventListener("abort", abort));
    child.on("error", (e) => {
      release();
      follow.fail(e);
    });
    child.on("close", (code) => this.followed(follow, stream, code, offset, Buffer.concat(err).toString("utf8").trim()).finally(release));
    return follow;
  }

  private async followed(follow: Follow, stream: "stdout" | "stderr", code: number | null, offset: number, message: string): Promise<void> {
    {
      if (code !== 0) {
        return follow.fail(!(await this.backend.show(this.id).then(() => true, () => false)) ? new NotFound(`no scope ${JSON.stringify(this.id)}`) : new RefineError("bad_request", message || `logs exited ${code}`));
      }
      let complete: boolean | null = null;
      if (this.child) {
        const e = await this.ended;
        complete = e.doc ? e.doc[stream].complete : null;
      }
      follow.end = { stream, endOffset: offset, complete };
      follow.finish();
    }
  }

  show(): Promise<ShowDoc> {
    return this.backend.show(this.id);
  }

  async result(options: { signal?: AbortSignal } = {}): Promise<ScopeResult> {
    const w = await this.wait({ signal: options.signal });
    const show = await this.show();
    return { ...w, result: show.result, receipt: show.receipt ?? null, show };
  }
}
