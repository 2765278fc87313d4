// What the tests share: the binaries (`$REFINE_BIN`, else the repository's debug build), a
// temporary home, a real `refine-supervisor serve` in it, and the kernel's view of processes.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const PKG = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const ROOT = resolve(PKG, "../../..");
export const BIN = process.env.REFINE_BIN ?? join(ROOT, "target", "debug", "refine-supervisor");
process.env.REFINE_BIN = BIN;

export function skipReason() {
  return existsSync(BIN) ? null : `${BIN} is not built (cargo build --workspace --bins)`;
}

export function tempHome() {
  const dir = mkdtempSync(join(tmpdir(), "refine-ts-"));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Polls `cond` until it returns a truthy value or `deadlineMs` passes (then throws `what`). */
export async function waitUntil(cond, what, deadlineMs = 30_000) {
  const end = Date.now() + deadlineMs;
  for (let delay = 5; ; delay = Math.min(delay * 2, 100)) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, delay));
  }
}

function connects(path) {
  return new Promise((resolve) => {
    const s = connect({ path });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/** `refine-supervisor serve` in `home`, up once its socket accepts (polled: no readiness event). */
export async function startService(home) {
  const proc = spawn(BIN, ["--home", home, "--port", "7411", "serve", "--shutdown-grace", "1s"], {
    stdio: ["ignore", "ignore", "ignore"],
    env: { ...process.env, REFINE_LOG_FILE: join(home, "service.log") },
  });
  const exited = new Promise((r) => proc.once("exit", (code, sig) => r(code ?? sig)));
  let gone = null;
  exited.then((v) => (gone = v));
  const socket = join(home, "run", "7411", "supervisor.sock");
  await waitUntil(async () => {
    if (gone !== null) throw new Error(`serve exited (${gone}) before it accepted; log: ${readLog(home)}`);
    return connects(socket);
  }, "serve to accept");
  return {
    socket,
    async stop() {
      if (gone === null) proc.kill("SIGTERM");
      await exited;
    },
  };
}

function readLog(home) {
  try {
    return readFileSync(join(home, "service.log"), "utf8").slice(-2000);
  } catch {
    return "(none)";
  }
}

/** The start time (field 22 of /proc/PID/stat) of `pid`, or null once it is gone (or a zombie). */
export function startTime(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] === "Z" || fields[0] === "X") return null;
    return Number(fields[19]);
  } catch {
    return null;
  }
}

/** Those of `procs` ({pid, start_time}) that still run as the same process. */
export function survivors(procs) {
  return procs.filter((p) => startTime(p.pid) === p.start_time);
}

/** The scope's processes once `count` of them run (the show document's `processes`). */
export async function treeOf(scope, count) {
  return waitUntil(async () => {
    const doc = await scope.show();
    return doc.processes.length >= count ? doc.processes : null;
  }, `${count} processes in scope ${scope.id}`);
}

/** Runs `node FILE ARGS...`; resolves with its status and output. */
export function runNode(file, args = [], env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file, ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
    let out = "";
    let err = "";
    child.stdout.on("data", (b) => (out += b));
    child.stderr.on("data", (b) => (err += b));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, out, err }));
  });
}

/**
 * Starts the host fixture (test/fixtures/host.mjs): it launches a tree and prints the id, then
 * stays until killed. Resolves with the id and the child, to kill.
 */
export function startHost(args, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(PKG, "test", "fixtures", "host.mjs"), ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env },
    });
    let out = "";
    let err = "";
    child.stderr.on("data", (b) => (err += b));
    child.stdout.on("data", (b) => {
      out += b;
      const nl = out.indexOf("\n");
      if (nl >= 0) resolve({ id: out.slice(0, nl).trim(), child, exited: new Promise((r) => child.once("close", r)) });
    });
    child.on("close", (code) => reject(new Error(`host exited ${code} before printing an id: ${err}`)));
  });
}

/** The events case, the same through the socket and without a service. */
export async function eventsCase(refine) {
  const assert = (await import("node:assert/strict")).default;
  const scope = await refine.launch(["true"], { label: "evented" });
  await scope.wait({ timeout: 30_000 });
  const stream = refine.events({ scope: scope.id });
  const seen = [];
  for await (const e of stream) seen.push(e);
  const kinds = seen.map((e) => e.kind);
  assert.ok(kinds.includes("launched") && kinds.includes("exited"), JSON.stringify(seen));
  assert.ok(seen.every((e) => e.id === scope.id));
  assert.notEqual(stream.cursor, null);
  const later = [];
  for await (const e of refine.events({ since: stream.cursor, scope: scope.id })) later.push(e);
  assert.deepEqual(later.filter((e) => ["launched", "started", "exited"].includes(e.kind)), []);
  const ac = new AbortController();
  const live = refine.events({ since: stream.cursor, follow: true, kinds: ["launched"], signal: ac.signal });
  const next = await refine.launch(["true"]);
  const got = await live.next();
  assert.equal(got.value.id, next.id);
  assert.equal(got.value.kind, "launched");
  ac.abort();
  await assert.rejects(live.next(), { name: "AbortError" });
  await next.wait({ timeout: 30_000 });
}

/** X12 through a client: a workspace-write sandbox with a named path and no network. */
export async function sandboxCase(refine) {
  const { mkdtempSync, mkdirSync, existsSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const top = mkdtempSync(join(tmpdir(), "refine-ts-sandbox-"));
  const [ws, named, outside] = ["ws", "named", "outside"].map((d) => join(top, d));
  for (const d of [ws, named, outside]) mkdirSync(d);
  try {
    const script = 'echo x > in; echo x > "$0/n"; echo x > "$1/o" 2>/dev/null; exit 0';
    const scope = await refine.launch(["sh", "-c", script, named, outside], {
      cwd: ws,
      sandbox: "workspace-write",
      sandboxPaths: [named],
      network: "none",
    });
    await scope.wait({ timeout: 60_000 });
    const doc = await scope.show();
    return {
      inside: existsSync(join(ws, "in")) && existsSync(join(named, "n")),
      outside: existsSync(join(outside, "o")),
      sandbox: doc.record?.sandbox,
    };
  } finally {
    rmSync(top, { recursive: true, force: true });
  }
}
