"""The service's upload reports a JSON Lines line cut off with its line, its column and "the
line ends early" (it used to say "Invalid control character at, column 243")."""

from __future__ import annotations

from tests.test_json_errors import _cut


def test_the_service_upload_says_the_line_ends_early(service_env, tmp_path):
    path, _ = _cut(tmp_path, newline=True)
    response = service_env["api"].upload(path, "predictions")
    assert response.status_code == 422
    message = response.json()["error"]["message"]
    assert message.startswith("cut.jsonl:2: invalid JSON at column"), message
    assert "the line ends early" in message
