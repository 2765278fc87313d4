/**
 * One connection to the service's socket (`run/P/supervisor.sock`, an `AF_UNIX` stream): requests
 * go out in order and their replies come back in the same order, one line each, except a
 * streaming request (`follow`, `events`), whose reply is several lines ending with its last one.
 * Each request waits in a queue for its turn at the replies; a refusal is one reply like any
 * other, so the connection stays usable after it.
 *
 * # Caveats
 * - The service closes a connection idle for 5 s between requests (unless a scope is bound to
 *   it, `end_with_connection`). `idleFor()` lets a caller reconnect before that instead of
 *   racing the close.
 * - While no request is pending the socket does not hold Node's event loop open (`unref`): a
 *   host whose work is done may exit, and the service then sees the connection end.
 * - A stream given up half-way (a `break` out of `follow`) leaves the connection mid-reply: it is
 *   destroyed, not reused.
 */
import { connect, type Socket } from "node:net";
import { ConnectionError, refusal } from "./errors.js";
import { encodeRequest, MAX_REPLY, parseReply, type ReplyLine } from "./wire.js";

/** A queued request's share of the replies: it takes lines until it says it is done. */
interface Turn {
  /** Takes one reply line; returns `true` when it was this request's last. */
  line(reply: ReplyLine): boolean;
  fail(err: Error): void;
}

export class Connection {
  private readonly sock: Socket;
  private readonly turns: Turn[] = [];
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private closedWith: Error | null = null;
  private lastUse = Date.now();
  private readonly closeWaiters: Array<() => void> = [];

  private constructor(sock: Socket) {
    this.sock = sock;
    sock.on("data", (chunk: Buffer) => this.onData(chunk));
    sock.on("error", (err) => this.end(new ConnectionError(`the service's socket broke: ${err.message}`, { cause: err })));
    sock.on("close", () => this.end(new ConnectionError("the service closed the connection before the reply was whole")));
    sock.unref();
  }

  /** Connects to the socket at `path`; rejects with the connect error (ENOENT, ECONNREFUSED). */
  static open(path: string): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const sock = connect({ path });
      const failed = (err: Error) => reject(err);
      sock.once("error", failed);
      sock.once("connect", () => {
        sock.off("error", failed);
        resolve(new Connection(sock));
      });
    });
  }

  /** Whether the connection has ended (closed by either side, or broken). */
  get closed(): boolean {
    return this.closedWith !== null;
  }

  /** Milliseconds since the last request was answered, 0 while one is pending. */
  idleFor(): number {
    return this.turns.length > 0 ? 0 : Date.now() - this.lastUse;
  }

  /** Resolves once the connection has ended. */
  whenClosed(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => this.closeWaiters.push(resolve));
  }

  /** Sends one request and resolves with its `result`; a refusal rejects with `RefineError`. */
  request(op: string, fields: Record<string, unknown>): Promise<Record<string, any>> {
    return new Promise((resolve, reject) => {
      this.enqueue(op, fields, {
        line(reply) {
          if (reply.ok) resolve(reply.result ?? {});
          else reject(refusal(reply.error?.kind, reply.error?.message));
          return true;
        },
        fail: reject,
      });
    });
  }

  /**
   * Sends a streaming request: every reply line's `result` is handed to `onResult`, which
   * returns `true` on the stream's last line. A refusal ends the stream with its error.
   * Reading pauses while `onResult`'s consumer is behind (`pause`/`resume` below).
   */
  stream(op: string, fields: Record<string, unknown>, onResult: (result: Record<string, any>) => boolean): Promise<void> {
    return new Promise((resolve, reject) => {
      this.enqueue(op, fields, {
        line(reply) {
          if (!reply.ok) {
            reject(refusal(reply.error?.kind, reply.error?.message));
            return true;
          }
          let last: boolean;
          try {
            last = onResult(reply.result ?? {});
          } catch (e) {
            reject(e);
            return true;
          }
          if (last) resolve();
          return last;
        },
        fail: reject,
      });
    });
  }

  /** Stops reading replies (a stream's consumer is behind); `resume` reads on. */
  pause(): void {
    this.sock.pause();
  }
  resume(): void {
    this.sock.resume();
  }

  /** Closes the connection; pending requests reject with `err` (or a `ConnectionError`). */
  close(err?: Error): void {
    this.end(err ?? new ConnectionError("the connection was closed by this client"));
    this.sock.destroy();
  }

  private enqueue(op: string, fields: Record<string, unknown>, turn: Turn): void {
    if (this.closedWith) {
      turn.fail(this.closedWith);
      return;
    }
    const line = encodeRequest(op, fields);
    this.turns.push(turn);
    this.sock.ref();
    this.sock.write(line);
  }

  private onData(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      if (nl < 0) break;
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      let line: string;
      if (this.pending.length) {
        this.pending.push(piece);
        line = Buffer.concat(this.pending).toString("utf8");
        this.pending = [];
        this.pendingBytes = 0;
      } else {
        line = piece.toString("utf8");
      }
      this.onLine(line);
      if (this.closedWith) return;
    }
    if (start < chunk.length) {
      this.pending.push(chunk.subarray(start));
      this.pendingBytes += chunk.length - start;
      if (this.pendingBytes > MAX_REPLY) this.close(new ConnectionError(`a reply line is past ${MAX_REPLY} bytes`));
    }
  }

  private onLine(line: string): void {
    const turn = this.turns[0];
    if (!turn) {
      this.close(new ConnectionError("the service sent a reply nobody asked for"));
      return;
    }
    let reply: ReplyLine;
    try {
      reply = parseReply(line);
    } catch (e) {
      this.close(e as Error);
      return;
    }
    if (turn.line(reply)) {
      this.turns.shift();
      this.lastUse = Date.now();
      if (this.turns.length === 0) this.sock.unref();
    }
  }

  private end(err: Error): void {
    if (this.closedWith) return;
    this.closedWith = err;
    for (const turn of this.turns.splice(0)) turn.fail(err);
    this.sock.unref();
    for (const w of this.closeWaiters.splice(0)) w();
  }
}
