"""The documentation: the site builds with no warning, README stays short, and every command
the README, the getting-started page, the formats walk-through and the Python page mark as
runnable (``<!-- runnable -->`` before a fenced block) runs, in a fresh folder holding the
project's examples and cassettes.

Each command runs in the installation the page tells the reader to make for it: the core
alone for ``<!-- runnable -->``, the core and the named extras for ``<!-- runnable: serve -->``
(the packages of every other extra cannot be imported, ``tests/minimal_env.py``), and the site
builds with the ``docs`` extra alone, as on a fresh machine."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.minimal_env import VARIABLE, environment, project_requirements
from tests.netguard.sitecustomize import subprocess_pythonpath

ROOT = Path(__file__).resolve().parents[1]
RUNNABLE = re.compile(r"<!-- runnable(?:: ([\w,]+))? -->\s*\n```(bash|python)\n(.*?)\n```", re.S)
DOC_PAGES = ["README.md", "docs/getting-started.md", "docs/formats.md", "docs/python.md"]
COPIED = ("examples", "cassettes", "tests/fixtures/formats")
"""What the pages' commands read, copied into the folder they run in."""
HARNESS = (".bin/", "cache/", "data/", "xdg-cache/")
"""What the test itself adds to that folder (a shim, cache and data dirs), not the commands."""


def runnable_blocks(path: Path) -> list[str]:
    """The page's runnable blocks as shell script; Python blocks run through ``python3 -``.
    Each starts by making the packages of the extras it does not name unimportable."""
    blocks = []
    for extras, language, body in RUNNABLE.findall(path.read_text(encoding="utf-8")):
        names = [e for e in extras.split(",") if e]
        missing = environment(*names)[VARIABLE]
        script = body if language == "bash" else f"python3 - <<'PYTHON'\n{body}\nPYTHON"
        blocks.append(f"export {VARIABLE}={shlex.quote(missing)}\n{script}")
    return blocks


@pytest.mark.parametrize("page", DOC_PAGES)
def test_a_block_that_needs_an_extra_follows_its_install_command(page: str) -> None:
    """A page that marks a block ``runnable: serve`` tells the reader to install that extra
    before it, and every extra a page installs is one ``pyproject.toml`` declares."""
    text = (ROOT / page).read_text(encoding="utf-8")
    declared = set(_project_extras())
    for match in RUNNABLE.finditer(text):
        for extra in filter(None, (match[1] or "").split(",")):
            assert extra in declared, (page, extra)
            assert f"pip install -e '.[{extra}]'" in text[:match.start()], (page, extra)
    for extras in re.findall(r"pip install -e '\.\[([\w,]+)\]'", text):
        assert set(extras.split(",")) <= declared, (page, extras)


def _project_extras() -> list[str]:
    return [name for name in project_requirements() if name]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.servers("subprocess")
@pytest.mark.timeout(300)  # mkdocs in a subprocess: a longer bound than the suite's 60 s
def test_site_builds_without_a_warning(tmp_path: Path) -> None:
    """As the documented command does on a fresh machine (``pip install -e '.[docs]'``): with
    only the core's and the ``docs`` extra's packages importable (no fastapi, the hooks read
    the committed ``docs/openapi.json``)."""
    pytest.importorskip("mkdocs", reason="the docs extra (mkdocs-material) is not installed")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": subprocess_pythonpath(ROOT), **environment("docs")}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert "WARNING" not in log, log
    published = tmp_path / "site" / "openapi.json"
    assert published.read_bytes() == (ROOT / "docs" / "openapi.json").read_bytes()
    api_page = (tmp_path / "site" / "http-api" / "index.html").read_text(encoding="utf-8")
    assert "<code>/v1/jobs</code>" in api_page and "create_job" in api_page
    assert (tmp_path / "site" / "glossary" / "index.html").is_file()
    loaded = _loaded_from_elsewhere(tmp_path / "site")
    assert loaded == [], f"the site asks other hosts for: {loaded[:10]}"


_LOADING_RELS = {"stylesheet", "preconnect", "dns-prefetch", "preload", "prefetch",
                 "modulepreload", "icon", "manifest", "apple-touch-icon"}
_OTHER_HOST = re.compile(r"^\s*(https?:)?//", re.I)
_CSS_URL = re.compile(r"(?:url\(\s*['\"]?|@import\s+['\"])((?:https?:)?//[^'\")\s]+)", re.I)


def _loaded_from_elsewhere(site: Path) -> list[str]:
    """``page: URL`` for every resource a built page or stylesheet loads from another host
    (a stylesheet, font, script, image, frame or a connection warmed up for one); links the
    reader may follow (``<a href>``) are not loads."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Loads(HTMLParser):
        def __init__(self, page: str) -> None:
            super().__init__()
            self.page = page

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            values = dict(attrs)
            urls = []
            if tag == "link" and _LOADING_RELS & set((values.get("rel") or "").split()):
                urls.append(values.get("href"))
            elif tag in ("script", "img", "iframe", "source", "audio", "video", "embed",
                         "input"):
                urls.append(values.get("src"))
            elif tag == "object":
                urls.append(values.get("data"))
            urls += [m[1] for m in _CSS_URL.finditer(values.get("style") or "")]
            found.extend(f"{self.page}: {url}" for url in urls
                         if url and _OTHER_HOST.match(url))

    for path in sorted(site.rglob("*")):
        name = str(path.relative_to(site))
        if path.suffix == ".html":
            parser = Loads(name)
            parser.feed(path.read_text(encoding="utf-8", errors="replace"))
            parser.close()
        elif path.suffix == ".css":
            text = path.read_text(encoding="utf-8", errors="replace")
            found.extend(f"{name}: {m[1]}" for m in _CSS_URL.finditer(text))
    return found


def test_every_benchmark_result_is_on_a_site_page_and_well_formed() -> None:
    """Each ``bench/results/NAME.json`` is rendered by some page (no figures nobody sees), and
    each page's marker names a file that exists, with rows as wide as their columns."""
    import json

    pages = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    shown = set(re.findall(r"<!-- generated:bench ([\w.-]+) -->", pages))
    written = {p.stem for p in (ROOT / "bench" / "results").glob("*.json")}
    assert written - shown == set(), "results no page shows"
    assert shown - written == set(), "pages name results no benchmark wrote"
    for name in written:
        record = json.loads((ROOT / "bench" / "results" / f"{name}.json").read_text("utf-8"))
        assert record["benchmark"] == name and record["command"].startswith("python bench/")
        assert record["tables"], name
        for table in record["tables"]:
            assert table["rows"], (name, table["title"])
            assert all(len(row) == len(table["columns"]) for row in table["rows"]), name


def test_a_pending_benchmark_table_says_so_until_its_results_exist(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``<!-- generated:bench NAME pending -->`` stands for a table whose script needs a model
    the build machine lacks: a note until the results exist, then a build error until the
    marker is switched; a pending marker without its script is an error at once."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    monkeypatch.setattr(hooks, "ROOT", tmp_path)
    page = "before\n<!-- generated:bench slow pending -->\nafter"
    with pytest.raises(FileNotFoundError, match=r"bench/slow\.py"):
        hooks.on_page_markdown(page, None, None, None)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "slow.py").write_text("", encoding="utf-8")
    rendered = hooks.on_page_markdown(page, None, None, None)
    assert "*Not measured yet: `python bench/slow.py` writes these figures" in rendered
    assert rendered.startswith("before\n") and rendered.endswith("\nafter")
    (tmp_path / "bench" / "results" / "slow.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="drop 'pending'"):
        hooks.on_page_markdown(page, None, None, None)


def _hooks() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


def test_pages_read_as_markdown_show_their_benchmark_tables() -> None:
    """A page read as plain Markdown (GitHub, an editor) shows the tables the site renders:
    each benchmark marker is followed by the tables ``bench/results/`` render, up to its end
    marker, exactly as ``python docs/_hooks.py`` writes them (run it after a benchmark)."""
    hooks = _hooks()
    stale = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for name in re.findall(r"<!-- generated:bench ([\w.-]+)(?: pending)? -->", text):
            assert f"<!-- end generated:bench {name} -->" in text, (
                f"{page.name}: the tables of {name} are not written into the page: run "
                "python docs/_hooks.py")
        if hooks.with_bench_blocks(text) != text:
            stale.append(page.name)
    assert not stale, f"tables differ from bench/results in {stale}: run python docs/_hooks.py"
    audit = (ROOT / "docs" / "audit.md").read_text(encoding="utf-8")
    assert "| reviews | original | da | da-p |" in audit  # the review-order table itself
    # the site shows each table once: the build replaces the whole block
    rendered = hooks.on_page_markdown(audit, None, None, None)
    assert rendered.count("**Share of the 2.1 → 2.4 JGA gap closed, first half (tuning), "
                          "order: jga") == 1
    assert "end generated:bench" not in rendered


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines (at most 150)"
    fence = lines.index("```bash")
    setup = lines[fence + 1:fence + 3]
    assert setup[0].startswith("python3 -m pip install -e . && dst-judge evaluate ")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert setup[1] in ci, "the README's test command is not what .ci/run runs"


@pytest.mark.servers("subprocess")
@pytest.mark.timeout(300)  # a subprocess running the CLI: a longer bound than the suite's 60 s
def test_the_first_setup_command_judges_the_example(tmp_path: Path) -> None:
    """The README's first command minus its install step (``pip install -e .``: the core
    alone, no extra importable)."""
    line = (ROOT / "README.md").read_text(encoding="utf-8").split("```bash\n", 1)[1]
    command = line.splitlines()[0].split(" && ", 1)[1]
    core = shlex.quote(environment()[VARIABLE])
    done = _run_script(f"export {VARIABLE}={core}\n{command}", tmp_path)
    assert "TSA" in done.stdout, done.stdout


@pytest.mark.servers("subprocess")
@pytest.mark.timeout(300)  # starts a server and runs jobs: a longer bound than the suite's 60 s
@pytest.mark.parametrize("page", DOC_PAGES)
def test_runnable_commands_of_the_page_run(page: str, tmp_path: Path) -> None:
    """Each page's commands run in a git checkout of what they read, and every file they
    leave there is one the project's ``.gitignore`` covers (``git status`` stays clean)."""
    blocks = runnable_blocks(ROOT / page)
    assert blocks, f"{page} marks no runnable command"
    port = str(free_port())
    script = "\n".join(block.replace("8765", port) for block in blocks)
    done = _run_script(script, tmp_path, checkout=True)
    left = _git(tmp_path, "status", "--porcelain", "--untracked-files=all").stdout
    assert left == "", f"{page}'s commands leave files .gitignore does not cover:\n{left}"
    if page == "docs/formats.md":
        _the_dry_run_figures_are_what_it_printed(script, done.stdout)


def _the_dry_run_figures_are_what_it_printed(script: str, printed: str) -> None:
    """The walk-through's comment on its dry run (``# 10 calls, ~4,600 prompt tokens``) is
    what the dry run prints (an earlier figure, ~8,400, was twice the truth)."""
    said = re.search(r"# (\d+) calls, ~([\d,]+) prompt tokens", script)
    assert said, "the walk-through no longer says what its dry run costs"
    calls = re.search(r"calls \(planned / already cached / to send\)\W+(\d+) / ", printed)
    tokens = re.search(r"prompt tokens \(static prefix\)\W+([\d,]+) \(", printed)
    assert calls and tokens, printed
    assert int(said[1]) == int(calls[1]), (said[0], calls[0])
    shown, counted = int(said[2].replace(",", "")), int(tokens[1].replace(",", ""))
    assert abs(shown - counted) <= 0.02 * counted, (said[0], f"printed {tokens[1]}")


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-c", "user.name=docs", "-c", "user.email=docs@test",
                           "-c", "commit.gpgsign=false", *args], cwd=folder,
                          capture_output=True, text=True, timeout=60, check=True)


def _run_script(script: str, folder: Path, *,
                checkout: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with bash in ``folder`` (examples/, cassettes/ and the format fixtures
    copied in), with ``dst-judge`` meaning this checkout; background processes are stopped at
    the end. ``checkout``: the folder is first a git repository of those files and the
    project's ``.gitignore``, committed."""
    for name in COPIED:
        shutil.copytree(ROOT / name, folder / name)
    if checkout:
        shutil.copy(ROOT / ".gitignore", folder / ".gitignore")
        _git(folder, "init", "-q")
        (folder / ".git" / "info").mkdir(exist_ok=True)
        (folder / ".git" / "info" / "exclude").write_text("\n".join(HARNESS) + "\n",
                                                          encoding="utf-8")
        _git(folder, "add", "-A")
        _git(folder, "commit", "-q", "-m", "the checkout")
    bin_dir = folder / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "dst-judge"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m judge "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    # a script, not a symlink: a symlinked venv interpreter finds no pyvenv.cfg beside it and
    # runs without the venv's packages
    python = bin_dir / "python3"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": subprocess_pythonpath(ROOT), "NO_PROXY": "127.0.0.1,localhost",
           "DST_JUDGE_CACHE_DIR": str(folder / "cache"), "XDG_DATA_HOME": str(folder / "data"),
           "XDG_CACHE_HOME": str(folder / "xdg-cache"), "TERM": "dumb"}
    wrapped = ("set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true; wait || true' EXIT\n"
               f"{script}\n")
    done = subprocess.run(["bash", "-c", wrapped], cwd=folder, capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, (f"exit {done.returncode}\n--- script\n{script}\n"
                                  f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_no_file_holds_merge_conflict_markers() -> None:
    """A merge resolved by hand once left its markers in README.md; nothing may carry them."""
    marked = []
    for path in ROOT.rglob("*"):
        if (path.suffix not in (".md", ".py", ".toml", ".yml", ".html", ".css", ".js", ".json")
                or any(part in (".git", "site", "node_modules", ".venv") for part in path.parts)
                or not path.is_file()):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                                      .splitlines(), 1):
            if line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "=======":
                marked.append(f"{path.relative_to(ROOT)}:{number}")
    assert not marked, marked
