"""An in-tree PEP 517 build backend (standard library only) for the C2 wheel: the client's
package plus the prebuilt `refine-supervisor` and `refine-guardian` in the wheel's
`.data/scripts/`, which pip installs onto the environment's PATH (`bin/`), side by side, where
refine-supervisor looks for its guardian. As ruff and uv ship their binaries.

The binaries come from `config_settings["bin-dir"]` (`pip wheel -C bin-dir=DIR`, or
`build-wheel DIR`), else `$REFINE_WHEEL_BIN_DIR`, else `<repo>/target/debug`. They are Linux
x86-64 executables, so the wheel is tagged `py3-none-linux_x86_64`. No sdist: the binaries are
built by cargo, not by this backend.
"""

import base64
import hashlib
import os
import pathlib
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
NAME = "refine_supervisor_client"
VERSION = "0.1.0"
TAG = "py3-none-linux_x86_64"
BINARIES = ("refine-supervisor", "refine-guardian")
SUMMARY = "Launch, wait for, signal and stop refine-supervisor scopes; ships the binaries"


def _bin_dir(config_settings):
    given = (config_settings or {}).get("bin-dir") or os.environ.get("REFINE_WHEEL_BIN_DIR")
    return pathlib.Path(given) if given else HERE.parents[2] / "target" / "debug"


def _metadata() -> str:
    return (
        "Metadata-Version: 2.1\n"
        f"Name: refine-supervisor-client\nVersion: {VERSION}\nSummary: {SUMMARY}\n"
        "Requires-Python: >=3.9\n"
    )


def _wheel_file() -> str:
    return f"Wheel-Version: 1.0\nGenerator: refine wheel_backend\nRoot-Is-Purelib: false\nTag: {TAG}\n"


class _Wheel:
    """A zip whose RECORD lists every member's sha256 and size (PEP 427)."""

    def __init__(self, path: pathlib.Path):
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1)
        self.record = []

    def add(self, name: str, data: bytes, mode: int = 0o644) -> None:
        info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append(f"{name},sha256={digest},{len(data)}")

    def close(self, record_name: str) -> None:
        self.record.append(f"{record_name},,")
        self.zip.writestr(zipfile.ZipInfo(record_name, date_time=(2026, 1, 1, 0, 0, 0)),
                          "\n".join(self.record) + "\n")
        self.zip.close()


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = pathlib.Path(metadata_directory) / f"{NAME}-{VERSION}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(_metadata())
    (info / "WHEEL").write_text(_wheel_file())
    return info.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    bins = _bin_dir(config_settings)
    missing = [b for b in BINARIES if not (bins / b).is_file()]
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} not in {bins} (cargo build --workspace --bins)")
    filename = f"{NAME}-{VERSION}-{TAG}.whl"
    wheel = _Wheel(pathlib.Path(wheel_directory) / filename)
    src = HERE / "src"
    for path in sorted((src / NAME).rglob("*.py")):
        wheel.add(path.relative_to(src).as_posix(), path.read_bytes())
    for binary in BINARIES:
        wheel.add(f"{NAME}-{VERSION}.data/scripts/{binary}", (bins / binary).read_bytes(), 0o755)
    info = f"{NAME}-{VERSION}.dist-info"
    wheel.add(f"{info}/METADATA", _metadata().encode())
    wheel.add(f"{info}/WHEEL", _wheel_file().encode())
    wheel.close(f"{info}/RECORD")
    return filename
