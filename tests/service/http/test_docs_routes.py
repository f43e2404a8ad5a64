"""Every server address the documentation names (`` `/docs` ``, `` `/v1/jobs/ID/events` ``,
`` `/ui/...` ``) is one the app serves: ``docs/http-api.md`` named ``/redoc`` after it was
removed."""

from __future__ import annotations

import re
from pathlib import Path

from judge.service import build_settings, create_app
from judge.web import mount_web
from tests.app_surface import routes

ROOT = Path(__file__).resolve().parents[3]
NAMED = re.compile(r"`(?:(?:GET|POST|PUT|PATCH|DELETE) )?(/[A-Za-z][\w./{}-]*)`")
FILESYSTEM = ("/etc/", "/tmp/", "/usr/", "/var/", "/home/", "/opt/", "/srv/")
"""Paths on a machine, not on the server."""


def _served(path: str, templates: list[str]) -> bool:
    """Whether ``path`` (its placeholders in capitals, ``ID``, or in braces) is a served
    path or a prefix of one."""
    parts = path.rstrip("/").split("/")
    for template in templates:
        have = template.rstrip("/").split("/")
        if len(have) < len(parts):
            continue
        if all(p == h or h.startswith("{") or p.isupper() or p.startswith("{")
               for p, h in zip(parts, have, strict=False)):
            return True
    return False


def test_every_path_the_docs_name_is_served(tmp_path):
    app = create_app(build_settings({"data_dir": tmp_path}))
    mount_web(app)
    templates = [r.path for r in routes(app)]
    assert "/docs" in templates and "/openapi.json" in templates
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = {(page.name, m) for page in pages
             for m in NAMED.findall(page.read_text(encoding="utf-8"))
             if not m.startswith(FILESYSTEM)}
    assert ("http-api.md", "/docs") in named  # the pattern finds what it should
    unserved = sorted((page, path) for page, path in named if not _served(path, templates))
    assert unserved == [], f"the docs name paths the server does not serve: {unserved}"
