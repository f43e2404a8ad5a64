"""Stand-ins for the local judge's outside world: part packages, a cmake and a llama-server
(a tiny Python HTTP server named ``llama-server``), so no test needs the network, real weights
or a real build."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import os
import signal
import sys
import zipfile
from pathlib import Path

from judge.model.local import LocalModel, Part, model_file
from judge.model.local._process import alive

PART_INIT = '''import os


def get_part_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "part01.bin")
'''

FAKE_SERVER = '''
import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

argv = sys.argv[1:]
mode = os.environ.get("FAKE_LLAMA_MODE", "ok")
print("fake llama-server " + " ".join(argv), flush=True)
if mode == "die":
    print("error: failed to load model", flush=True)
    sys.exit(1)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
ready_at = time.monotonic() + (1e9 if mode == "loading" else 0.3)


class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/health" and time.monotonic() >= ready_at
        body = {"status": "ok"} if ok else {"error": {"code": 503, "message": "Loading model"}}
        data = json.dumps(body).encode()
        self.send_response(200 if ok else 503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


host = argv[argv.index("--host") + 1]
port = int(argv[argv.index("--port") + 1])
HTTPServer((host, port), Health).serve_forever()
'''

FAKE_CMAKE = '''
import json
import os
import sys
from pathlib import Path

args = sys.argv[1:]
with open(os.environ["FAKE_CMAKE_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if "--build" in args:
    if os.environ.get("FAKE_CMAKE_FAIL"):
        print("error: compiler exploded")
        sys.exit(2)
    build = Path(args[args.index("--build") + 1])
    for pct in (10, 55, 100):
        print(f"[{pct:3d}%] Building CXX object part{pct}.o", flush=True)
    (build / "bin").mkdir(parents=True, exist_ok=True)
    (build / "bin" / "llama-server").write_text("#!/bin/sh\\necho built\\n")
else:
    assert (Path(args[args.index("-S") + 1]) / "CMakeLists.txt").is_file()
    Path(args[args.index("-B") + 1]).mkdir(parents=True, exist_ok=True)
    print("-- Configuring done")
'''


def script(path: Path, body: str) -> Path:
    """An executable Python script at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    path.chmod(0o755)
    return path


def payloads() -> list[bytes]:
    return [b"GGUF" + bytes(range(256)) * 40, b"middle part " * 300, b"tail"]


PREFIX, MODULE, VERSION = "dstjudge-fake-part", "dstjudge_fake_part", "0.0.1"


def wheel_bytes(index: int, payload: bytes, init: str = PART_INIT) -> bytes:
    """A minimal valid wheel of part ``index``: its module and data file, laid out like the
    published parts (``<module>/data/partNN.bin``). Built with fixed timestamps, so the same
    content always gives the same bytes and sha256 (what the catalogue pins)."""
    module, dist = f"{MODULE}{index}", f"{PREFIX}{index}"
    stem = dist.replace("-", "_")
    info = f"{stem}-{VERSION}.dist-info"
    files = {
        f"{module}/__init__.py": init.encode(),
        f"{module}/data/part{index:02d}.bin": payload,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {VERSION}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                         b"Tag: py3-none-any\n",
        f"{info}/top_level.txt": f"{module}\n".encode(),
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data,
                             compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def wheel_name(index: int) -> str:
    return f"{MODULE}{index}-{VERSION}-py3-none-any.whl"


def fake_spec(parts: list[bytes], name: str = "fake", init: str = PART_INIT) -> LocalModel:
    """A catalogue entry pinning the wheels :func:`write_wheels` writes for ``parts``."""
    whole = b"".join(parts)
    pinned = tuple(
        Part(hashlib.sha256(wheel_bytes(i, payload, init)).hexdigest(),
             hashlib.sha256(payload).hexdigest(), len(payload))
        for i, payload in enumerate(parts, start=1))
    return LocalModel(
        name=name, description="fake test model", package_prefix=PREFIX, module_prefix=MODULE,
        version=VERSION, filename=f"{name}.gguf", sha256=hashlib.sha256(whole).hexdigest(),
        pinned=pinned, size=len(whole))


def write_wheels(directory: Path, parts: list[bytes], init: str = PART_INIT) -> list[Path]:
    """The part wheels of ``parts`` in ``directory`` (a ``--find-links`` directory)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, payload in enumerate(parts, start=1):
        path = directory / wheel_name(i)
        path.write_bytes(wheel_bytes(i, payload, init))
        paths.append(path)
    return paths


def part_files(directory: Path, parts: list[bytes]) -> list[Path]:
    """Plain files holding the parts' data, for the assembly tests."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, payload in enumerate(parts, start=1):
        path = directory / f"part{i:02d}.bin"
        path.write_bytes(payload)
        paths.append(path)
    return paths


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def servers_using(cache: Path) -> list[int]:
    """PIDs of live processes whose command line names this cache's weights."""
    needle = str(model_file("fake", cache)).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if needle in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                    pids.append(int(entry.name))
    return pids
