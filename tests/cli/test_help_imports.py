"""``dst-judge --help`` (and building the parser every command starts with) imports none of the
slow libraries and none of the stages: the Batch API's SDK, scipy, scikit-learn, matplotlib,
pandas, numpy, httpx, jsonschema, rapidfuzz and every stage (data, metrics, method, model,
pipeline, store, analysis) load in the command that uses them; the parser's choices come from
``judge._names``. ``import judge`` loads no stage at all (its names
are imported on first use) and still gives every name of ``judge.__all__``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.netguard.sitecustomize import subprocess_pythonpath

ROOT = Path(__file__).resolve().parents[2]

SLOW = ("openai", "scipy", "sklearn", "matplotlib", "pandas", "numpy", "judge.analysis",
        "judge.service", "judge.web", "fastapi", "sqlalchemy", "judge.data", "judge.metrics",
        "judge.method", "judge.model", "judge.pipeline", "judge.store", "judge.client",
        "judge._api_models", "httpx", "jsonschema", "rapidfuzz")
"""Modules (and their submodules) the help path must not import."""

HELP = """
import contextlib, io, json, sys
from judge.cli import main
for argv in (["--help"], ["evaluate", "--help"], ["labels", "sample", "--help"],
             ["convert", "--help"], ["validate", "--help"], ["report", "--help"],
             ["local", "setup", "--help"], ["jobs", "--help"]):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main(argv)
        except SystemExit as exc:
            assert exc.code == 0, (argv, exc.code)
    assert "usage: dst-judge" in out.getvalue(), argv
print(json.dumps(sorted(sys.modules)))
"""

IMPORT = """
import json, sys
import judge
loaded = sorted(sys.modules)
names = {name: type(getattr(judge, name)).__name__ for name in judge.__all__}
print(json.dumps({"loaded": loaded, "names": names, "dir": sorted(dir(judge))}))
"""


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": subprocess_pythonpath(ROOT)})
    assert done.returncode == 0, done.stderr
    return done.stdout


def _slow(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == s or m.startswith(s + ".") for s in SLOW)]


def test_help_imports_no_slow_library() -> None:
    loaded = json.loads(_run(HELP))
    assert "judge.cli" in loaded
    assert _slow(loaded) == []


def test_import_judge_loads_no_stage_and_every_public_name_resolves() -> None:
    found = json.loads(_run(IMPORT))
    stages = [m for m in found["loaded"] if m.startswith("judge.")
              and m not in ("judge._version",)]
    assert stages == []
    assert _slow(found["loaded"]) == []
    assert set(found["names"]) <= set(found["dir"])
    assert found["names"]["evaluate"] == "function" and found["names"]["Run"] == "type"
    assert found["names"]["__version__"] == "str"
