// The framing alone, without a service: API 2 (`reason` an object tagged by `kind`) is what is
// written and read; a version-1 reply (reasons as strings) is refused in one line, not half-read.
import assert from "node:assert/strict";
import { test } from "node:test";
import { API_VERSION, RefineError } from "../dist/index.js";
import { encodeRequest, parseReply } from "../dist/wire.js";

test("the reply version is 2 and a version-1 reply is refused", () => {
  assert.equal(API_VERSION, 2);
  assert.ok(encodeRequest("list", {}).toString().startsWith('{"v":2,'));
  assert.equal(parseReply('{"v":2,"ok":true,"result":{"list":[]}}').ok, true);
  assert.throws(
    () => parseReply('{"v":1,"ok":true,"result":{"list":[]}}'),
    (e) => e instanceof RefineError && e.kind === "bad_reply" && /1/.test(e.message) && /2/.test(e.message),
  );
});
