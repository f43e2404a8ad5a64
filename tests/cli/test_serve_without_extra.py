"""Without the ``serve`` extra every ``serve`` subcommand (and ``worker``) says it needs the
extra, with exit status 2, instead of ending in a ``ModuleNotFoundError`` traceback."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from judge.cli import build_parser
from tests.netguard.sitecustomize import subprocess_pythonpath

ROOT = Path(__file__).resolve().parents[2]

# One process runs every command with the extra's modules unimportable (a meta-path hook, as
# when fastapi is not installed) and reports each command's exit status, stderr and whether an
# exception escaped main().
DRIVER = """
import contextlib, io, json, sys, traceback
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('fastapi', 'starlette', 'uvicorn', 'sqlalchemy', 'alembic',
                                  'psycopg', 'prometheus_client', 'fastapi_offline'):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from judge.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    escaped = None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except BaseException:
            rc, escaped = None, traceback.format_exc()
    results.append({"argv": argv, "rc": rc, "err": err.getvalue(), "escaped": escaped})
print(json.dumps(results))
"""


def _subcommands(parser: argparse.ArgumentParser, *path: str) -> list[tuple[str, ...]]:
    """Every leaf command under ``path`` (a command with subcommands of its own counts as one
    too when they are optional, as ``serve`` is)."""
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [path]
    leaves = [] if subs[0].required else [path]
    for name in subs[0].choices:
        leaves += _subcommands(build_parser(), *path, name)
    return leaves


def test_every_serve_subcommand_says_it_needs_the_extra(tmp_path):
    data = ["--data-dir", str(tmp_path / "data")]
    argvs = {
        ("serve",): ["serve", *data, "--port", "0"],
        ("serve", "token", "create"): ["serve", "token", "create", "--project", "lab",
                                       "--init", *data],
        ("serve", "token", "list"): ["serve", "token", "list", *data],
        ("serve", "token", "revoke"): ["serve", "token", "revoke", "tok_x", *data],
        ("serve", "token", "rotate"): ["serve", "token", "rotate", "bob", "--project", "lab",
                                       *data],
        ("serve", "copy-db"): ["serve", "copy-db", "--from", f"sqlite:///{tmp_path}/a.db",
                               "--to", f"sqlite:///{tmp_path}/b.db"],
        ("worker",): ["worker", *data],
    }
    # a new serve subcommand must join this test
    assert set(_subcommands(build_parser(), "serve")) | {("worker",)} == set(argvs)
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(list(argvs.values()))],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "PYTHONPATH": subprocess_pythonpath(ROOT)})
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert len(results) == len(argvs)
    for result in results:
        command = " ".join(result["argv"][:3])
        assert result["escaped"] is None, f"{command}: {result['escaped']}"
        assert result["rc"] == 2, (command, result)
        assert result["err"].strip() == ("dst-judge: error: the service needs the serve extra: "
                                         "pip install 'dst-judge[serve]'"), command
        assert "Traceback" not in result["err"] and "ModuleNotFoundError" not in result["err"]
    assert not (tmp_path / "data").exists()  # nothing made before the refusal
