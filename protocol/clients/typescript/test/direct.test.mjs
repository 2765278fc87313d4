// The client without a service: each launch a `refine-supervisor run --json` child in a
// temporary home; the same operations and the same keep rule as through the socket.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { NotFound, Refine, RefineError, SpawnFailed } from "../dist/index.js";
import { eventsCase, PKG, runNode, skipReason, startHost, survivors, tempHome, treeOf } from "./helpers.mjs";
import { sandboxCase } from "./helpers.mjs";

const skip = skipReason();

describe("without a service", { skip: skip ?? false }, () => {
  let home, refine;
  before(() => {
    home = tempHome();
    refine = Refine.direct({ home: home.dir });
  });
  after(async () => {
    await refine?.close();
    for (const row of (await refine?.list().catch(() => [])) ?? []) await (await refine.adopt(row.id)).stop();
    home?.remove();
  });

  test("a workspace-write sandbox keeps writes in the workspace (X12)", async () => {
    const got = await sandboxCase(refine);
    assert.equal(got.inside, true);
    assert.equal(got.outside, false);
    assert.equal(got.sandbox?.mode, "workspace_write");
    assert.equal(got.sandbox?.network, "none");
  });

  test("a memoryMax past which the tree is OOM-killed, and the result says so (H8)", async (t) => {
    let scope;
    try {
      scope = await refine.launch(["python3", "-c", "b = b'x' * (64 << 20)"], { memoryMax: 32 << 20 });
    } catch (e) {
      if (e instanceof RefineError) return t.skip(`no memory limit here: ${e.message}`);
      throw e;
    }
    assert.equal((await scope.wait({ timeout: 60_000 })).exitCode, 137);
    const r = await scope.result();
    assert.equal(r.result.reason, "oom");
  });

  test("a ready probe: starting until it exits 0, then ready (H6)", async () => {
    const scope = await refine.launch(["sleep", "600"], { ready: "cmd=true", readyTimeout: 60_000 });
    const deadline = Date.now() + 30_000;
    let state;
    while (Date.now() < deadline) {
      state = (await scope.show()).readiness?.state;
      if (state === "ready") break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(state, "ready");
    await scope.stop();
  });

  test("launch and wait: the exit code, this process's cwd, show, list", async () => {
    assert.equal(refine.mode, "direct");
    const scope = await refine.launch(["sh", "-c", 'pwd > where; test "$GREETING" = hi || exit 9; exit 3'], {
      label: "job",
      cwd: home.dir,
      env: { GREETING: "hi" },
    });
    assert.equal(scope.id.length, 32);
    assert.deepEqual(await scope.wait({ timeout: 30_000 }), { id: scope.id, state: "exited", exitCode: 3, timedOut: false });
    assert.equal(readFileSync(join(home.dir, "where"), "utf8").trim(), home.dir);
    assert.equal((await refine.show("job")).id, scope.id);
    assert.ok((await refine.list({ all: true })).some((row) => row.id === scope.id));
    const r = await scope.result();
    assert.equal(r.result.outcome, "completed");
    assert.ok(r.receipt);
  });

  test("arguments that are not UTF-8 pass as bytes", async () => {
    const scope = await refine.launch(["sh", "-c", 'printf %s "$1" | od -An -tx1', "sh", Buffer.from([0xff, 0x0a, 0x41])]);
    assert.equal((await scope.follow().bytes()).toString().trim(), "ff 0a 41");
    assert.equal((await scope.wait()).exitCode, 0);
  });

  test("stop with a grace ends the whole tree: no process of it survives", async () => {
    const scope = await refine.launch(["sh", "-c", "sleep 100 & sleep 100 & wait"]);
    const tree = await treeOf(scope, 3);
    assert.equal(survivors(tree).length, 3, "the check sees the live tree (negative control)");
    const doc = await scope.stop({ grace: 2000 });
    assert.equal(doc.state, "exited", JSON.stringify(doc));
    assert.deepEqual(survivors(tree), []);
    assert.equal((await scope.wait({ timeout: 30_000 })).state, "exited");
  });

  test("signal, a wait that times out, and a wait an AbortSignal cancels", async () => {
    const scope = await refine.launch(["sleep", "600"]);
    assert.equal((await scope.wait({ timeout: 200 })).timedOut, true);
    const ac = new AbortController();
    const waiting = scope.wait({ signal: ac.signal });
    ac.abort();
    await assert.rejects(waiting, { name: "AbortError" });
    assert.equal((await scope.show()).state, "live");
    assert.equal(await scope.signal("USR1"), true);
    assert.equal((await scope.wait({ timeout: 30_000 })).exitCode, 128 + 10);
    assert.equal(await scope.signal("USR1"), false);
    await assert.rejects(scope.signal("KILL"), (e) => e.kind === "unsupported");
  });

  test("input feeds the workload's stdin and closes it", async () => {
    const scope = await refine.launch(["sh", "-c", "cat > got"], { cwd: home.dir, input: true });
    assert.equal(await scope.input("one\n"), 4);
    assert.equal(await scope.input(Buffer.from([0xff, 0x0a]), { close: true }), 2);
    assert.equal((await scope.wait({ timeout: 30_000 })).exitCode, 0);
    assert.deepEqual(readFileSync(join(home.dir, "got")), Buffer.from([0x6f, 0x6e, 0x65, 0x0a, 0xff, 0x0a]));
    await assert.rejects(scope.input("late"), (e) => e instanceof RefineError && e.kind === "bad_request");
  });

  test("follow yields the output's exact bytes until the end", async () => {
    const scope = await refine.launch(["sh", "-c", "printf 'a\\n'; printf 'b\\0\\n' >&2; sleep 0.2; printf 'c\\n'"]);
    const out = scope.follow();
    assert.deepEqual(await out.bytes(), Buffer.from("a\nc\n"));
    assert.deepEqual(out.end, { stream: "stdout", endOffset: 4, complete: true });
    assert.deepEqual(await scope.follow({ stream: "stderr" }).bytes(), Buffer.from("b\0\n"));
    assert.deepEqual(await scope.follow({ fromOffset: 2 }).bytes(), Buffer.from("c\n"));
  });

  test("an unknown id is NotFound", async () => {
    await assert.rejects(refine.show("nobody"), NotFound);
    await assert.rejects(refine.adopt("nobody"), NotFound);
    assert.ok(Array.isArray(await refine.list()));
  });

  test("a program that does not exist: SpawnFailed, or (found by ps first) a scope that waits 127", async () => {
    try {
      const scope = await refine.launch(["/nonexistent/program"]);
      assert.equal((await scope.wait({ timeout: 30_000 })).exitCode, 127);
    } catch (e) {
      assert.ok(e instanceof SpawnFailed && e.errno === 2 && e.id.length === 32, String(e));
    }
  });

  test("keep: the scope outlives its host (SIGKILLed); adopt it by id, follow, wait and stop it", async () => {
    const host = await startHost(["direct", home.dir, "keep"]);
    host.child.kill("SIGKILL");
    await host.exited;
    const scope = await refine.adopt(host.id);
    const tree = await treeOf(scope, 3);
    assert.equal((await scope.wait({ timeout: 300 })).timedOut, true, "a kept scope is still live");
    const output = scope.follow();
    const ac = new AbortController();
    const waiting = scope.wait({ signal: ac.signal });
    ac.abort();
    await assert.rejects(waiting, { name: "AbortError" });
    await assert.rejects(scope.signal("TERM"), (e) => e.kind === "unsupported");
    const doc = await scope.stop({ grace: 1000 });
    assert.equal(doc.state, "exited");
    assert.deepEqual(await output.bytes(), Buffer.alloc(0));
    assert.equal((await scope.wait({ timeout: 30_000 })).state, "exited");
    assert.deepEqual(survivors(tree), []);
  });

  test("without keep the scope ends with its host: the host SIGKILLed, its tree is stopped", async () => {
    const host = await startHost(["direct", home.dir, "nokeep"]);
    const scope = await refine.adopt(host.id);
    const tree = await treeOf(scope, 3);
    host.child.kill("SIGKILL");
    await host.exited;
    const done = await scope.wait({ timeout: 30_000 });
    assert.equal(done.state, "exited");
    assert.deepEqual(survivors(tree), []);
  });

  test("close ends the launches made without keep", async () => {
    const other = Refine.direct({ home: home.dir });
    const scope = await other.launch(["sh", "-c", "sleep 600 & sleep 600 & wait"], { stopGrace: 500 });
    const tree = await treeOf(scope, 3);
    await other.close();
    assert.equal((await (await refine.adopt(scope.id)).wait({ timeout: 30_000 })).state, "exited");
    assert.deepEqual(survivors(tree), []);
  });

  test("events: a scope's from launch to end, resumed from a cursor, followed until aborted", () => eventsCase(refine));

  test("the example replaces a killpg sweep", async () => {
    const r = await runNode(join(PKG, "examples", "replace-killpg.mjs"), [], { REFINE_HOME: home.dir, REFINE_SOCKET: "", TIMEOUT_MS: "300" });
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^exit (124|137), exited, 0 left$/m);
  });
});
