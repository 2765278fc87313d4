/**
 * The socket's framing (protocol/README.md, "The JSON contract"): one JSON object per line,
 * `\n`-terminated UTF-8, at most 1 MiB a request line, every message with `"v": 2`; a reply of
 * another version is refused rather than guessed at. And the conversions a request needs:
 * durations to whole milliseconds, arguments to text.
 */
import { RefineError } from "./errors.js";

/** 2: every `reason` is an object tagged by `kind`; a version-1 reply (reasons as strings) is refused. */
export const API_VERSION = 2;
/** The longest request line the service takes (longer ones end the connection). */
export const MAX_REQUEST = 1024 * 1024;
/** The longest reply line this client buffers (a `list` of a large home can pass 1 MiB). */
export const MAX_REPLY = 64 * 1024 * 1024;
/** Every duration the service takes is at most 3650 days. */
export const MAX_DURATION_MS = 3650 * 24 * 3600 * 1000;

/** One request line: `v`, `op`, then the fields that are not `undefined` (absent: the default). */
export function encodeRequest(op: string, fields: Record<string, unknown>): Buffer {
  const msg: Record<string, unknown> = { v: API_VERSION, op };
  for (const [k, v] of Object.entries(fields)) if (v !== undefined && v !== null) msg[k] = v;
  const line = Buffer.from(JSON.stringify(msg) + "\n", "utf8");
  if (line.length > MAX_REQUEST) {
    throw new RangeError(`request of ${line.length} bytes is past the socket's ${MAX_REQUEST}`);
  }
  return line;
}

/** A reply line parsed, its version checked; the caller looks at `ok`. */
export interface ReplyLine {
  v: number;
  ok: boolean;
  result?: Record<string, any> | null;
  error?: { kind?: string; message?: string } | null;
}

export function parseReply(line: string): ReplyLine {
  let reply: ReplyLine;
  try {
    reply = JSON.parse(line);
  } catch (e) {
    throw new RefineError("bad_reply", `a reply line is not JSON: ${String(e)}`);
  }
  if (typeof reply !== "object" || reply === null || reply.v !== API_VERSION) {
    throw new RefineError("bad_reply", `reply version ${JSON.stringify((reply as any)?.v)}, this client speaks ${API_VERSION} (a version-1 service sends reasons as strings: upgrade it)`);
  }
  return reply;
}

/** A duration given in milliseconds, checked and made a whole number (`undefined` stays absent). */
export function ms(value: number | undefined, name: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative number of milliseconds, not ${value}`);
  }
  if (value > MAX_DURATION_MS) throw new RangeError(`${name} of ${value} ms is past 3650 days`);
  return Math.round(value);
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** Text for the socket: a string as it is, bytes only when they are UTF-8. */
export function text(value: string | Uint8Array, what: string): string {
  if (typeof value === "string") return value;
  try {
    return strictUtf8.decode(value);
  } catch {
    throw new TypeError(
      `${what} ${JSON.stringify(Buffer.from(value).toString("latin1"))} is not UTF-8: the socket carries text ` +
        "(the service-less mode, through `refine-supervisor run`, takes any bytes)",
    );
  }
}
