"""Building llama-server: tool checks, the cmake recipe (run by a fake cmake), the per-CPU
binary cache and the log tail on failure."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tarfile
from pathlib import Path

import pytest

from judge._errors import BuildToolMissing, ChecksumError, LocalSetupError
from judge.model.local import _build as build
from judge.model.local import build_server, check_build_tools, find_server_binary, server_binary

from ._fakes import FAKE_CMAKE, script


def test_build_recipe_flags():
    assert set(build.CMAKE_FLAGS) == {
        "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF"}
    assert build.PORTABLE_FLAGS == ("-DGGML_NATIVE=OFF",)
    assert build.LLAMA_CPP_PYTHON_VERSION == "0.3.36"


def _which_without(*absent: str):
    real = build.shutil.which

    def which(name, *args, **kwargs):
        return None if name in absent else real(name, *args, **kwargs)

    return which


def test_missing_cmake_is_named_with_install_hint(monkeypatch):
    monkeypatch.setattr(build.shutil, "which", _which_without("cmake"))
    with pytest.raises(BuildToolMissing) as err:
        check_build_tools()
    assert err.value.missing == ["cmake"]
    assert "cmake not found on PATH" in str(err.value)
    assert "apt-get install cmake g++" in str(err.value)


def test_missing_compiler_is_named(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(build.shutil, "which", _which_without("c++", "g++", "clang++"))
    with pytest.raises(BuildToolMissing, match=r"C\+\+ compiler not found") as err:
        check_build_tools()
    assert err.value.missing == ["C++ compiler"]
    assert isinstance(err.value, LocalSetupError)


def test_build_progress_lines():
    assert build._build_fraction("[ 42%] Building CXX object x.o") == pytest.approx(0.42)
    assert build._build_fraction("[12/48] Building CXX object x.o") == pytest.approx(0.25)
    assert build._build_fraction("-- Configuring done") is None


def test_cached_binary_skips_the_build(tmp_path, monkeypatch):
    binary = script(server_binary(tmp_path), "print('cached')\n")
    monkeypatch.setattr(build.shutil, "which", lambda *a, **k: None)  # no tools needed
    assert build_server(cache_dir=tmp_path, progress=False) == (binary, False)
    assert find_server_binary(tmp_path) == binary


@pytest.fixture
def fake_toolchain(tmp_path, monkeypatch):
    """PATH holding only a fake cmake (records its arguments) and stub compilers/make."""
    bin_dir = tmp_path / "bin"
    script(bin_dir / "cmake", FAKE_CMAKE)
    for tool in ("cc", "c++", "make"):
        script(bin_dir / tool, "")
    log = tmp_path / "cmake-calls.jsonl"
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_CMAKE_LOG", str(log))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)

    def fake_sdist(dest: Path, *, quiet: bool, **_: object) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        archive = dest / "llama_cpp_python-0.3.36.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            data = b"project(llama.cpp)\n"
            member = tarfile.TarInfo("llama_cpp_python-0.3.36/vendor/llama.cpp/CMakeLists.txt")
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
        return archive

    monkeypatch.setattr(build, "_download_sdist", fake_sdist)
    return log


@pytest.mark.parametrize("portable", [False, True])
def test_build_with_fake_cmake(tmp_path, fake_toolchain, portable):
    cache = tmp_path / "cache"
    path, built = build_server(cache_dir=cache, portable=portable, jobs=3, progress=False)
    assert built and path == server_binary(cache, portable=portable)
    assert os.access(path, os.X_OK) and "built" in path.read_text()
    configure, compile_ = (json.loads(line) for line in fake_toolchain.read_text().splitlines())
    assert set(build.CMAKE_FLAGS) <= set(configure)
    assert ("-DGGML_NATIVE=OFF" in configure) is portable
    assert configure[configure.index("-S") + 1].endswith("vendor/llama.cpp")
    assert compile_[compile_.index("--target") + 1] == "llama-server"
    assert compile_[compile_.index("-j") + 1] == "3"
    meta = json.loads((path.parent / "build.json").read_text())
    assert meta["portable"] is portable and meta["llama_cpp_python"] == "0.3.36"
    assert not (cache / "build").exists()
    assert "[100%]" in (cache / "build.log").read_text()
    # a second call reuses the binary without running cmake again
    assert build_server(cache_dir=cache, portable=portable, progress=False) == (path, False)
    assert len(fake_toolchain.read_text().splitlines()) == 2


def test_failed_build_reports_the_log_tail(tmp_path, fake_toolchain, monkeypatch):
    monkeypatch.setenv("FAKE_CMAKE_FAIL", "1")
    with pytest.raises(LocalSetupError, match="cmake build failed") as err:
        build_server(cache_dir=tmp_path, progress=False)
    assert "compiler exploded" in str(err.value)
    assert find_server_binary(tmp_path) is None


def test_the_sources_are_downloaded_hash_pinned(tmp_path, monkeypatch):
    """A source archive that is not the pinned one is refused (and deleted) before it is
    unpacked or built, even when pip let it through."""
    calls = tmp_path / "pip-calls"
    fake_pip = script(tmp_path / "fake-pip", f'''
import sys
from pathlib import Path
args = sys.argv[1:]
Path({str(calls)!r}).write_text(repr(args) + "\\n" + open(args[args.index("-r") + 1]).read())
dest = Path(args[args.index("-d") + 1])
(dest / "llama_cpp_python-0.3.36.tar.gz").write_bytes(b"not the published sources")
''')
    monkeypatch.setattr(build._progress, "PIP", (sys.executable, str(fake_pip)))
    monkeypatch.setattr(build, "_unpack_sdist", lambda *a: pytest.fail("unpacked"))
    with pytest.raises(ChecksumError, match="does not match its pinned sha256"):
        build._download_sdist(tmp_path / "sdist", quiet=True)
    assert not list((tmp_path / "sdist").glob("*.tar.gz"))
    args, pin = calls.read_text().split("\n", 1)
    assert "'--require-hashes'" in args and "'download'" in args
    assert pin == (f"llama-cpp-python==0.3.36 --hash=sha256:"
                   f"{build._registry.LLAMA_CPP_PYTHON_SHA256}\n")
    # the same archive, pinned, is accepted
    monkeypatch.setattr(build._registry, "LLAMA_CPP_PYTHON_SHA256",
                        hashlib.sha256(b"not the published sources").hexdigest())
    archive = build._download_sdist(tmp_path / "sdist", quiet=True)
    assert archive.read_bytes() == b"not the published sources"
