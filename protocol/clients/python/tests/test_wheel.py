"""The C2 wheel: built by build-wheel from the binaries beside $REFINE_BIN, installed offline
into a fresh venv, and used from there alone: the installed refine-supervisor (which finds the
installed guardian beside itself) and the installed client in service-less mode. The wheel and
its venv are cached under target/py-wheel/, rebuilt when a binary or a source file changes."""

import hashlib
import json
import os
import shutil
import subprocess

import pytest

from conftest import BIN, PACKAGE, ROOT

CACHE = ROOT / "target" / "py-wheel"


def _key(bins):
    h = hashlib.sha256()
    for b in ("refine-supervisor", "refine-guardian"):
        st = (bins / b).stat()
        h.update(f"{b} {st.st_size} {st.st_mtime_ns}\n".encode())
    for path in sorted([PACKAGE / "wheel_backend.py", PACKAGE / "build-wheel",
                        *(PACKAGE / "src").rglob("*.py")]):
        h.update(path.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def venv():
    bins = BIN.parent
    if not (bins / "refine-guardian").exists():
        pytest.skip(f"no refine-guardian beside {BIN}")
    venv, stamp = CACHE / "venv", CACHE / "stamp"
    key = _key(bins)
    if not (stamp.exists() and stamp.read_text() == key):
        shutil.rmtree(CACHE, ignore_errors=True)
        CACHE.mkdir(parents=True)
        built = subprocess.run([str(PACKAGE / "build-wheel"), str(bins), str(CACHE / "dist")],
                               capture_output=True, text=True, check=True)
        wheel = built.stdout.strip()
        assert wheel.endswith("-py3-none-linux_x86_64.whl"), built
        subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--no-deps", wheel],
                       check=True)
        stamp.write_text(key)
    return venv


def _env(venv):
    env = {k: v for k, v in os.environ.items()
           if k not in ("REFINE_BIN", "REFINE_GUARDIAN", "PYTHONPATH", "REFINE_HOME")}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    return env


def test_installed_binaries_run_a_launch(venv, tmp_path):
    exe = venv / "bin" / "refine-supervisor"
    assert (venv / "bin" / "refine-guardian").is_file() and os.access(exe, os.X_OK)
    run = subprocess.run([str(exe), "--home", str(tmp_path), "run", "--json", "--", "echo", "hi"],
                         env=_env(venv), capture_output=True, timeout=60)
    assert run.returncode == 0, run
    doc = json.loads(run.stdout)
    assert doc["outcome"] == "completed" and doc["exit_code"] == 0
    assert open(doc["stdout"]["path"], "rb").read() == b"hi\n"


def test_installed_client_uses_the_installed_binaries(venv, tmp_path):
    code = (
        "import sys, refine_supervisor_client as r\n"
        "assert r.__file__.startswith(sys.prefix), r.__file__\n"
        "with r.Client.local(home=sys.argv[1]) as c:\n"
        "    job = c.launch(['echo', 'hi'])\n"
        "    assert job.wait().exit_code == 0\n"
        "    print(b''.join(job.follow()).decode(), end='')\n"
        "    print(c.launch(['sh', '-c', 'sleep 600 & wait']).stop(grace=1)['state'])\n"
    )
    run = subprocess.run([str(venv / "bin" / "python"), "-c", code, str(tmp_path)], env=_env(venv),
                         capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert run.returncode == 0, run
    assert run.stdout == "hi\nexited\n", run
