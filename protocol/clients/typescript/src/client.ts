/**
 * `Refine`: one face for both modes. Through the service's socket (`Refine.connect`), or
 * without a service, each launch a `refine-supervisor run` child (`Refine.direct`);
 * `Refine.open` takes the socket when it answers and otherwise goes without.
 *
 * The keep rule is the same in both: a launch without `keep` does not outlive this process
 * (nor this client: `close()` ends it); `keep: true` is work meant to outlive it, found again
 * after a restart with `adopt(id)`.
 */
import { DirectBackend, type DirectOptions } from "./direct.js";
import type { ScopeView, ShowDoc } from "./generated/index.js";
import { ServiceBackend, socketPath, type SocketOptions } from "./service.js";
import type { Arg, EventStream, EventsOptions, LaunchOptions, Mode, Scope } from "./types.js";

type Backend = ServiceBackend | DirectBackend;

export interface OpenOptions extends SocketOptions, DirectOptions {
  /** `service`: the socket or fail; `direct`: no service; absent: the socket if it answers, else direct. */
  mode?: Mode;
}

export class Refine {
  private readonly backend: Backend;

  private constructor(backend: Backend) {
    this.backend = backend;
  }

  /** Through the service's socket (`path`, or `home` and `port`, or `$REFINE_SOCKET`). */
  static async connect(options: SocketOptions = {}): Promise<Refine> {
    return new Refine(await ServiceBackend.connect(options));
  }

  /** Without a service: `refine-supervisor run` children (the binary from `bin`, `$REFINE_BIN`, beside this package, PATH). */
  static direct(options: DirectOptions = {}): Refine {
    return new Refine(new DirectBackend(options));
  }

  /** The service when its socket answers (or `mode` says so), otherwise the service-less mode. */
  static async open(options: OpenOptions = {}): Promise<Refine> {
    if (options.mode === "direct") return Refine.direct(options);
    if (options.mode === "service") return Refine.connect(options);
    let path: string | null = null;
    try {
      path = socketPath(options);
    } catch {
      // No socket to try.
    }
    if (path) {
      try {
        return await Refine.connect({ ...options, path });
      } catch {
        // Nothing answers there: go without.
      }
    }
    return Refine.direct(options);
  }

  get mode(): Mode {
    return this.backend.mode;
  }

  /**
   * Launches `argv` in a scope of its own; resolves once it is registered, with its handle.
   * Rejects with `SpawnFailed` when the workload never ran, `RefineError` on a refusal.
   */
  launch(argv: readonly Arg[], options: LaunchOptions = {}): Promise<Scope> {
    return this.backend.launch(argv, options);
  }

  /** A handle of an existing scope (an id, a 4+ hex prefix or a label), e.g. after this process restarted. */
  adopt(id: string): Promise<Scope> {
    return this.backend.adopt(id);
  }

  /** Scopes as `ps --json` rows: live ones, or with `all` the exited too. */
  list(options: { all?: boolean } = {}): Promise<ScopeView[]> {
    return this.backend.list(!!options.all);
  }

  show(id: string): Promise<ShowDoc> {
    return this.backend.show(id);
  }

  /** The service's events (after `since`; with `follow`, new ones as they come). Service only. */
  events(options: EventsOptions = {}): EventStream {
    return this.backend.events(options);
  }

  /** Closes the client; the launches it made without `keep` end (the service, or `run`, stops them). */
  close(): Promise<void> {
    return this.backend.close();
  }
}
