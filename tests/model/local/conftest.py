"""Fixtures of the local-judge tests: a fake model in the catalogue and a cache that is set up
(verified fake weights, the fake llama-server in the binary slot)."""

from __future__ import annotations

import contextlib
import json

import pytest

from judge._names import LOCAL_MODELS
from judge.model.local import MODELS, model_file, server_binary
from judge.model.local._install import assemble_parts
from judge.model.local._process import is_llama_server
from judge.model.local._registry import state_file

from ._fakes import FAKE_SERVER, fake_spec, kill, part_files, payloads, script


@pytest.fixture
def fake_local_model(monkeypatch):
    parts = payloads()
    spec = fake_spec(parts)
    monkeypatch.setitem(MODELS, spec.name, spec)
    # the CLI's --model choices come from judge._names (the parser loads no stage)
    monkeypatch.setitem(LOCAL_MODELS, spec.name, spec.description)
    return spec, parts


@pytest.fixture
def server_cache(tmp_path, fake_local_model):
    """A cache with verified fake weights and the fake llama-server in the binary slot."""
    spec, parts = fake_local_model
    cache = tmp_path / "cache"
    assemble_parts(part_files(tmp_path / "parts", parts), model_file("fake", cache),
                   sha256=spec.sha256, size=spec.size)
    script(server_binary(cache), FAKE_SERVER)
    yield cache
    # never leave a server behind: stop whatever this cache still records, by its PID
    with contextlib.suppress(Exception):
        info = json.loads(state_file(cache).read_text())
        if is_llama_server(info["pid"]):
            kill(info["pid"])
