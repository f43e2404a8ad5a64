"""``dst-judge serve`` itself serves the web interface (the CLI mounts it on the service's
app): a real server process, a login through the form, a page behind it."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.service.serve_process import ServeProcess, create_token

# These tests start server processes (and wait on them with deadlines of their own): a longer
# bound than the suite's 60 s, still finite.
pytestmark = [pytest.mark.timeout(300), pytest.mark.servers]


def test_dst_judge_serve_serves_the_web_interface(tmp_path):
    data = tmp_path / "serve"
    token = create_token(data, "lab", "read,review")
    endpoints = {"fake": {"base_url": "http://127.0.0.1:9"}}
    with ServeProcess(data, endpoints=endpoints) as server, \
            httpx.Client(base_url=server.url, trust_env=False, timeout=30) as client:
        home = client.get("/", follow_redirects=True)
        assert home.status_code == 200 and str(home.url).endswith("/ui/login?next=%2Fui%2F")
        assert "script-src 'self'" in home.headers["content-security-policy"]
        nonce = re.search(r'name="csrf" value="([^"]+)"', home.text).group(1)
        done = client.post("/ui/login", data={"token": token, "csrf": nonce})
        assert done.status_code == 303 and "HttpOnly" in done.headers["set-cookie"]
        runs = client.get("/ui/")
        assert runs.status_code == 200 and "No runs yet." in runs.text
        assert client.get("/ui/static/app.js").status_code == 200
