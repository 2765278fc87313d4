// The client through a real `refine-supervisor serve` in a temporary home: every operation, the
// keep rule, adopt after the launching host is gone, refusals that leave the connection usable.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { NotFound, Refine, RefineError, SpawnFailed } from "../dist/index.js";
import { eventsCase, PKG, runNode, skipReason, startHost, startService, survivors, tempHome, treeOf } from "./helpers.mjs";
import { sandboxCase } from "./helpers.mjs";

const skip = skipReason();

describe("through the service's socket", { skip: skip ?? false }, () => {
  let home, service, refine;
  before(async () => {
    home = tempHome();
    service = await startService(home.dir);
    refine = await Refine.connect({ home: home.dir });
  });
  after(async () => {
    await refine?.close();
    await service?.stop();
    home?.remove();
  });

  test("a workspace-write sandbox keeps writes in the workspace (X12)", async () => {
    const got = await sandboxCase(refine);
    assert.equal(got.inside, true);
    assert.equal(got.outside, false);
    assert.equal(got.sandbox?.mode, "workspace_write");
    assert.equal(got.sandbox?.network, "none");
  });

  test("launch and wait: the exit code, this process's cwd, show by prefix", async () => {
    assert.equal(refine.mode, "service");
    const scope = await refine.launch(["sh", "-c", "pwd > where; exit 3"], { label: "job", cwd: home.dir });
    const done = await scope.wait({ timeout: 30_000 });
    assert.deepEqual(done, { id: scope.id, state: "exited", exitCode: 3, timedOut: false });
    assert.equal(readFileSync(join(home.dir, "where"), "utf8").trim(), home.dir);
    const shown = await refine.show(scope.id.slice(0, 8));
    assert.equal(shown.state, "exited");
    assert.equal(shown.record.label, "job");
    const defaulted = await refine.launch(["sh", "-c", 'test "$(pwd)" = "$HERE"'], { env: { HERE: process.cwd() } });
    assert.equal((await defaulted.wait()).exitCode, 0, "cwd defaults to this process's");
  });

  test("argv as bytes, env, list; bytes that are not UTF-8 throw", async () => {
    const scope = await refine.launch([Buffer.from("sh"), new TextEncoder().encode("-c"), 'test "$GREETING" = hi'], { env: { GREETING: "hi" } });
    assert.equal((await scope.wait()).exitCode, 0);
    assert.ok((await refine.list({ all: true })).some((row) => row.id === scope.id));
    await assert.rejects(refine.launch([Buffer.from([0xff])]), /not UTF-8/);
  });

  test("stop with a grace ends the whole tree: no process of it survives", async () => {
    const scope = await refine.launch(["sh", "-c", "sleep 100 & sleep 100 & wait"]);
    const tree = await treeOf(scope, 3);
    assert.equal(survivors(tree).length, 3, "the check sees the live tree (negative control)");
    const doc = await scope.stop({ grace: 2000 });
    assert.equal(doc.state, "exited", JSON.stringify(doc));
    assert.deepEqual(survivors(tree), [], `still running: ${JSON.stringify(survivors(tree))}`);
    const done = await scope.wait({ timeout: 30_000 });
    assert.equal(done.state, "exited");
    const r = await scope.result();
    assert.equal(r.result.outcome, "stopped");
    assert.ok(r.receipt, "a receipt proves the end");
  });

  test("signal, a wait that times out, and a wait an AbortSignal cancels", async () => {
    const scope = await refine.launch(["sleep", "600"]);
    const timed = await scope.wait({ timeout: 200 });
    assert.equal(timed.timedOut, true);
    assert.equal(timed.state, "live");
    const ac = new AbortController();
    const waiting = scope.wait({ signal: ac.signal });
    ac.abort();
    await assert.rejects(waiting, { name: "AbortError" });
    assert.equal((await scope.show()).state, "live", "an abandoned wait leaves the scope alone");
    assert.equal(await scope.signal("USR1"), true);
    assert.equal((await scope.wait({ timeout: 30_000 })).exitCode, 128 + 10);
    assert.equal(await scope.signal("SIGUSR1"), false);
  });

  test("input feeds the workload's stdin and closes it", async () => {
    const scope = await refine.launch(["sh", "-c", "cat > got"], { cwd: home.dir, input: true });
    assert.equal(await scope.input("one\n"), 4);
    assert.equal(await scope.input(Buffer.from("two\n"), { close: true }), 4);
    assert.equal((await scope.wait({ timeout: 30_000 })).exitCode, 0);
    assert.equal(readFileSync(join(home.dir, "got"), "utf8"), "one\ntwo\n");
    await assert.rejects(scope.input("late"), (e) => e instanceof RefineError && e.kind === "bad_request");
  });

  test("follow yields the output's exact bytes until the end", async () => {
    const scope = await refine.launch(["sh", "-c", "printf 'a\\n'; printf 'b\\0\\n' >&2; sleep 0.2; printf 'c\\n'"]);
    const out = scope.follow();
    assert.deepEqual(await out.bytes(), Buffer.from("a\nc\n"));
    assert.deepEqual(out.end, { stream: "stdout", endOffset: 4, complete: true });
    assert.deepEqual(await scope.follow({ stream: "stderr" }).bytes(), Buffer.from("b\0\n"));
    assert.deepEqual(await scope.follow({ fromOffset: 2 }).bytes(), Buffer.from("c\n"));
    const chunks = [];
    for await (const chunk of scope.follow()) chunks.push(chunk);
    assert.equal(Buffer.concat(chunks).toString(), "a\nc\n");
  });

  test("a refusal (not_found, bad_request) leaves the connection usable", async () => {
    await assert.rejects(refine.show("nobody"), (e) => e instanceof NotFound && e.kind === "not_found");
    await assert.rejects(refine.adopt("nobody"), NotFound);
    const scope = await refine.launch(["sleep", "600"]);
    await assert.rejects(scope.signal("NOPE"), (e) => e instanceof RefineError && e.kind === "bad_request");
    assert.ok(Array.isArray(await refine.list()));
    await scope.stop();
  });

  test("a program that does not exist is SpawnFailed", async () => {
    await assert.rejects(refine.launch(["/nonexistent/program"]), (e) => e instanceof SpawnFailed && e.errno === 2 && e.id.length === 32);
  });

  test("keep: the scope outlives its host (SIGKILLed); adopt it by id, follow, wait and stop it", async () => {
    const host = await startHost(["service", home.dir, "keep"]);
    host.child.kill("SIGKILL");
    await host.exited;
    const scope = await refine.adopt(host.id.slice(0, 10));
    assert.equal(scope.id, host.id);
    assert.equal(scope.keep, null);
    const tree = await treeOf(scope, 3);
    assert.equal((await scope.wait({ timeout: 300 })).timedOut, true, "a kept scope is still live");
    const output = scope.follow();
    const doc = await scope.stop({ grace: 1000 });
    assert.equal(doc.state, "exited");
    assert.deepEqual(await output.bytes(), Buffer.alloc(0));
    assert.equal(output.end.complete, true);
    assert.deepEqual(survivors(tree), []);
  });

  test("without keep the scope ends with its host: the host SIGKILLed, its tree is stopped", async () => {
    const host = await startHost(["service", home.dir, "nokeep"]);
    const scope = await refine.adopt(host.id);
    const tree = await treeOf(scope, 3);
    host.child.kill("SIGKILL");
    await host.exited;
    const done = await scope.wait({ timeout: 30_000 });
    assert.equal(done.timedOut, false);
    assert.equal(done.state, "exited");
    assert.equal((await scope.show()).result.outcome, "stopped");
    assert.deepEqual(survivors(tree), []);
  });

  test("without keep the scope ends when its client closes; a kept one does not", async () => {
    const other = await Refine.connect({ home: home.dir });
    const bound = await other.launch(["sh", "-c", "sleep 600 & sleep 600 & wait"]);
    const kept = await other.launch(["sleep", "600"], { keep: true });
    const tree = await treeOf(await refine.adopt(bound.id), 3);
    await other.close();
    assert.equal((await (await refine.adopt(bound.id)).wait({ timeout: 30_000 })).state, "exited");
    assert.deepEqual(survivors(tree), []);
    const keptScope = await refine.adopt(kept.id);
    assert.equal((await keptScope.show()).state, "live");
    await keptScope.stop();
  });

  test("a client idle past the service's idle timeout keeps its bound scope; later launches bind to it too", async () => {
    const other = await Refine.connect({ home: home.dir });
    const first = await other.launch(["sleep", "600"]);
    // Another connection waits out the service's 5 s idle timeout while `other` says nothing.
    assert.equal((await (await refine.adopt(first.id)).wait({ timeout: 6000 })).timedOut, true);
    assert.equal((await refine.show(first.id)).state, "live", "the idle client's scope was stopped");
    const second = await other.launch(["sleep", "600"]);
    const trees = [await treeOf(first, 1), await treeOf(second, 1)];
    await other.close();
    for (const id of [first.id, second.id]) {
      assert.equal((await (await refine.adopt(id)).wait({ timeout: 30_000 })).state, "exited", id);
    }
    assert.deepEqual(survivors(trees.flat()), []);
  });

  test("open takes the socket when it answers", async () => {
    const opened = await Refine.open({ home: home.dir });
    assert.equal(opened.mode, "service");
    await opened.close();
    const none = tempHome();
    const direct = await Refine.open({ home: none.dir });
    assert.equal(direct.mode, "direct");
    none.remove();
  });

  test("events: a scope's from launch to end, resumed from a cursor, followed until aborted", () => eventsCase(refine));

  test("the example replaces a killpg sweep", async () => {
    const r = await runNode(join(PKG, "examples", "replace-killpg.mjs"), [], { REFINE_HOME: home.dir, REFINE_SOCKET: "", TIMEOUT_MS: "300" });
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^exit (124|137|143), exited, 0 left$/m);
  });
});
