"""The set-up commands the README and the docs give, each in the installation it makes rather
than in the all-extras one the suite runs in (``tests/minimal_env.py`` makes the packages of
the other extras unimportable in a subprocess):

* ``pip install -e .`` then the tour's commands, and ``pip install -e '.[serve]'`` then the
  service's: ``tests/test_docs.py`` runs each marked block in its own installation;
* ``pip install -e '.[docs]' && mkdocs build --strict``: ``tests/test_docs.py`` builds the site
  with the ``docs`` extra alone;
* ``dst-judge local setup`` (core only): here, with fake part wheels in a local folder that
  pip downloads from (no index) and a fake server binary, so nothing leaves the machine or is
  built;
* ``pip install -e '.[test]' && python3 -m pytest``: here, every package a test imports
  (outside ``pytest.importorskip``) comes with the ``test`` extra.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.minimal_env import environment, importable
from tests.netguard.sitecustomize import subprocess_pythonpath

ROOT = Path(__file__).resolve().parents[1]

SETUP = """
import json, os, sys
from pathlib import Path
from judge._names import LOCAL_MODELS
from judge.cli import main
from judge.model.local import MODELS, server_binary
from judge.model.local._registry import default_cache_dir
from tests.model.local._fakes import FAKE_SERVER, fake_spec, payloads, script, write_wheels

parts = payloads()
spec = fake_spec(parts)
MODELS[spec.name] = spec
LOCAL_MODELS[spec.name] = spec.description  # the parser's --model choices
cache = default_cache_dir()
write_wheels(Path(os.environ["PIP_FIND_LINKS"]), parts)  # what the index would serve
script(server_binary(cache), FAKE_SERVER)  # what the build would have made
status = main(["local", "setup", "--model", spec.name])
print(json.dumps({"status": status, "unimportable": sorted(sys.meta_path[0].names),
                  "loaded": sorted(sys.modules)}))
"""


def test_local_setup_runs_with_the_core_alone(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": subprocess_pythonpath(ROOT), **environment(),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "TERM": "dumb",
           # pip downloads the fake part wheels from a local folder, never an index
           "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "wheels"),
           "PIP_NO_CACHE_DIR": "1"}
    done = subprocess.run([sys.executable, "-c", SETUP], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    *printed, last = done.stdout.strip().splitlines()
    result = json.loads(last)
    assert result["status"] == 0, done.stdout + done.stderr
    assert "fastapi" in result["unimportable"] and "mkdocs" in result["unimportable"]
    assert not any(m.split(".")[0] in result["unimportable"] for m in result["loaded"])
    said = "\n".join(printed) + done.stderr
    assert "sha256 verified" in said and "next: dst-judge local serve --model fake" in said
    assert "Traceback" not in done.stderr
    weights = tmp_path / "cache" / "dst-judge" / "local"
    assert any(weights.rglob("fake.gguf"))


def _imported(path: Path) -> set[str]:
    """Top-level modules a test file imports, leaving out imports guarded by ``try``, by a
    Python version check, or named by a ``pytest.importorskip`` of the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    guards = [t for t in ast.walk(tree) if isinstance(t, ast.Try)
              or (isinstance(t, ast.If) and "version_info" in ast.unparse(t.test))]
    guarded = {id(node) for t in guards for node in ast.walk(t)}
    skipped = {str(node.args[0].value).split(".")[0] for node in ast.walk(tree)
               if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("importorskip")
               and node.args and isinstance(node.args[0], ast.Constant)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found - skipped


def test_the_test_extra_brings_what_the_tests_import() -> None:
    local = {"judge", "tests", "conftest"} | {p.stem for p in (ROOT / "tests").rglob("*.py")}
    allowed = importable("test") | set(sys.stdlib_module_names) | local
    missing = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        outside = _imported(path) - allowed
        if outside:
            missing[str(path.relative_to(ROOT))] = sorted(outside)
    assert missing == {}, ("imported by tests but not brought by the test extra "
                           f"(add it there, or pytest.importorskip it): {missing}")
