"""Types generated from protocol/schema/ by datamodel-code-generator, driven against a real
`serve`: every request is built from the generated models and every reply parsed by them.

Usage: roundtrip.py SCHEMA_DIR OUT_DIR SOCKET. Prints one line per step; exits non-zero with
the reason on the first mismatch."""

import enum
import importlib
import inspect
import json
import re
import socket
import subprocess
import sys

schema_dir, out_dir, sock_path = sys.argv[1:4]
subprocess.run(
    [
        sys.executable, "-m", "datamodel_code_generator",
        "--input", schema_dir, "--input-file-type", "jsonschema",
        "--output", f"{out_dir}/refine_models", "--output-model-type", "pydantic_v2.BaseModel",
        "--use-title-as-name",
    ],
    check=True,
)
sys.path.insert(0, out_dir)
request_mod = importlib.import_module("refine_models.request")
response_mod = importlib.import_module("refine_models.response")

# No class is a numbered collision of another (ErrorKind1, Kind2): one type per definition.
import pkgutil

import refine_models

classes = {}
for info in pkgutil.iter_modules(refine_models.__path__):
    mod = importlib.import_module(f"refine_models.{info.name}")
    for n, o in vars(mod).items():
        if inspect.isclass(o) and o.__module__ == mod.__name__:
            classes.setdefault(n, o)
numbered = sorted(n for n in classes if re.fullmatch(r"[A-Za-z]+\d+", n))
print(f"{len(classes)} generated classes, numbered: {numbered}")
assert not numbered, f"numbered collisions: {numbered}"

# An enum with a documented variant is one enum.
error_kind = classes.get("ErrorKind")
assert inspect.isclass(error_kind) and issubclass(error_kind, enum.Enum), error_kind
assert {"label_held", "bad_request"} <= {e.value for e in error_kind}, list(error_kind)
print("ErrorKind is one enum:", sorted(e.value for e in error_kind))

Request = request_mod.Request
Response = response_mod.Response


def call(fields):
    """Builds the request from the generated model, sends it, parses the reply with the model."""
    req = Request.model_validate(fields)
    line = req.model_dump_json(exclude_unset=True, by_alias=True)
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(sock_path)
    conn.sendall(line.encode() + b"\n")
    reply = conn.makefile("rb").readline()
    conn.close()
    resp = Response.model_validate_json(reply)
    raw = json.loads(reply)
    print(f"-> {line}\n<- ok={raw['ok']} keys={sorted((raw.get('result') or raw.get('error')).keys())}")
    return resp, raw


# The minimal launch a host writes: no label, no cwd, no env, no meta, no pty.
_, launched = call({"v": 2, "op": "launch", "argv": ["sleep", "600"], "kind": "command"})
assert launched["ok"], launched
scope = launched["result"]["launched"]["id"]
_, listed = call({"v": 2, "op": "list"})
assert any(r["id"] == scope for r in listed["result"]["list"]), listed
_, shown = call({"v": 2, "op": "show", "id": scope})
assert shown["result"]["show"]["state"] == "live", shown
_, stopped = call({"v": 2, "op": "stop", "id": scope, "grace_ms": 2000})
assert stopped["result"]["stop"]["state"] == "exited", stopped
_, refused = call({"v": 2, "op": "show", "id": "f" * 32})
assert not refused["ok"] and refused["error"]["kind"] == "not_found", refused
print("round trip: ok")
